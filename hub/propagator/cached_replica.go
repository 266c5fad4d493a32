package propagator

import (
	"maps"
	"slices"
	"strings"
	"sync"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// clusterLabelsElided is the key CompactReplica puts in a cached replica's labels in place of its
// cluster-name and cluster-namespace labels when both equal its namespace. It is not a valid
// label key (the space), so no object the apiserver returns can carry it.
const clusterLabelsElided = "regent.dev/cluster-labels elided"

// CompactReplica makes a replica about to enter the hub's cache (after TrimReplica) share what it
// has in common with the others: a hub caches one replica per cluster and root, 150,000 on a
// large fleet, and their metadata repeats. Its labels and annotations maps become maps shared by
// every replica of the root (the cluster labels, the only per-cluster entries, are elided and
// marked, see labelsMatch), its strings the canonical copies of equal strings (unique). Shared
// maps must not be written to, as nothing in the cache may be. Roots are left alone.
func CompactReplica(p *policyv1.Policy) {
	if !isReplica(p) {
		return
	}
	p.Labels = sharedMaps.get(elideClusterLabels(p.Labels, p.Namespace))
	if _, templated := p.Annotations[hubTemplatesAnnotation]; !templated {
		// A templated replica's annotations are its cluster's own (resolved hash, IV).
		p.Annotations = sharedMaps.get(p.Annotations)
	}
	p.APIVersion, p.Kind = intern(p.APIVersion), intern(p.Kind)
	p.Name, p.Namespace, p.GenerateName = intern(p.Name), intern(p.Namespace), intern(p.GenerateName)
	p.Spec.RemediationAction = policyv1.RemediationAction(intern(string(p.Spec.RemediationAction)))
	p.Status.ComplianceState = policyv1.ComplianceState(intern(string(p.Status.ComplianceState)))
	p.Status.RolloutStatus = policyv1.RolloutStatus(intern(string(p.Status.RolloutStatus)))
	// Never read on a replica and never set by this hub.
	p.OwnerReferences = nil
}

// CompactRoot makes a root's status, one line per selected cluster (3,000 lines for a root on
// 3,000 clusters, as many as its replicas), share its strings with the other roots' lines and its
// equal transition times with its own other lines. Contents are unchanged: the hub writes a root's
// status back, from a deep copy.
func CompactRoot(p *policyv1.Policy) {
	if isReplica(p) {
		return
	}
	times := map[metav1.Time]*metav1.Time{}
	for _, c := range p.Status.Status {
		if c == nil {
			continue
		}
		c.ClusterName, c.ClusterNamespace = intern(c.ClusterName), intern(c.ClusterNamespace)
		c.ComplianceState = policyv1.ComplianceState(intern(string(c.ComplianceState)))
		c.RolloutStatus = policyv1.RolloutStatus(intern(string(c.RolloutStatus)))
		if c.LastTransitionTime == nil {
			continue
		}
		if shared, ok := times[*c.LastTransitionTime]; ok {
			c.LastTransitionTime = shared
		} else {
			times[*c.LastTransitionTime] = c.LastTransitionTime
		}
	}
}

func intern(s string) string {
	if s == "" {
		return ""
	}
	return unique.Make(s).Value()
}

// elideClusterLabels returns labels without the two cluster labels and with the marker when both
// equal namespace, as they do on every replica this hub writes; labels itself otherwise.
func elideClusterLabels(labels map[string]string, namespace string) map[string]string {
	if v, ok := labels[ClusterNameLabel]; !ok || v != namespace {
		return labels
	}
	if v, ok := labels[ClusterNSLabel]; !ok || v != namespace {
		return labels
	}
	out := make(map[string]string, len(labels)-1)
	for k, v := range labels {
		if k != ClusterNameLabel && k != ClusterNSLabel {
			out[k] = v
		}
	}
	out[clusterLabelsElided] = ""
	return out
}

// labelsMatch says whether a replica's labels are want, reading the cluster labels CompactReplica
// elided as the replica's namespace.
func labelsMatch(rep *CachedReplica, want map[string]string) bool {
	if _, elided := rep.labels[clusterLabelsElided]; !elided {
		return mapsEqual(rep.labels, want)
	}
	if len(rep.labels)+1 != len(want) || want[ClusterNameLabel] != rep.namespace || want[ClusterNSLabel] != rep.namespace {
		return false
	}
	for k, v := range rep.labels {
		if k == clusterLabelsElided {
			continue
		}
		if w, ok := want[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// sharedMaps hands out one map per content. Bounded: past maxSharedMaps distinct contents (a
// hub whose roots' labels churn) it starts over; maps handed out before stay valid, only unshared
// with later equal ones.
var sharedMaps = &mapTable{m: map[string]map[string]string{}}

const maxSharedMaps = 4096

type mapTable struct {
	mu sync.Mutex
	m  map[string]map[string]string
}

func (t *mapTable) get(in map[string]string) map[string]string {
	if len(in) == 0 {
		return nil
	}
	key := mapKey(in)
	t.mu.Lock()
	defer t.mu.Unlock()
	if shared, ok := t.m[key]; ok {
		return shared
	}
	if len(t.m) >= maxSharedMaps {
		clear(t.m)
	}
	shared := make(map[string]string, len(in))
	for k, v := range in {
		shared[intern(k)] = intern(v)
	}
	t.m[key] = shared
	return shared
}

// mapKey encodes a map's entries, sorted, with lengths so that no two contents share a key.
func mapKey(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	for _, k := range keys {
		writeLen(&b, k)
		writeLen(&b, m[k])
	}
	return b.String()
}

func writeLen(b *strings.Builder, s string) {
	n := len(s)
	for {
		b.WriteByte(byte(n&0x7f) | 0x80*byte(min(n>>7, 1)))
		n >>= 7
		if n == 0 {
			break
		}
	}
	b.WriteString(s)
}
