package propagator

import (
	"maps"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// specs are the two versions of a root's spec a replica can carry: active, the root as it is
// (what a cluster gets once its turn came), and inform, the same with remediation set to inform
// (what a cluster waiting in a progressive rollout carries). Shared read-only across clusters.
type specs struct {
	active, inform, enforced *policyv1.PolicySpec
	// hash holds the SpecHash of each of the three.
	hash map[*policyv1.PolicySpec]string
}

// setMembers are the members of the PolicySets root depends on: those dependencies are replaced by
// dependencies on the members (policyset_dependencies.go).
func specsOf(root *policyv1.Policy, setMembers map[types.NamespacedName][]string) specs {
	active := &root.Spec
	if expanded := expandPolicySetDependencies(root, active, setMembers); expanded != nil {
		active = expanded
	}
	inform := active.DeepCopy()
	inform.RemediationAction = policyv1.Inform
	enforced := active.DeepCopy()
	enforced.RemediationAction = policyv1.Enforce
	sp := specs{active: active, inform: inform, enforced: enforced, hash: make(map[*policyv1.PolicySpec]string, 3)}
	for _, spec := range []*policyv1.PolicySpec{sp.active, sp.inform, sp.enforced} {
		sp.hash[spec] = SpecHash(spec)
	}
	return sp
}

// replicaMeta returns the labels and annotations of root's replica in cluster, with OCM's
// copyPolicyMetadata semantics: all of the root's metadata by default, only the policy framework's
// own when false.
func replicaMeta(root *policyv1.Policy, cluster string) (labels, annotations map[string]string) {
	copyAll := root.Spec.CopyPolicyMetadata == nil || *root.Spec.CopyPolicyMetadata
	keep := func(in map[string]string) map[string]string {
		out := make(map[string]string, len(in)+3)
		for k, v := range in {
			if k == lastAppliedConfig {
				continue
			}
			if copyAll || strings.HasPrefix(k, frameworkPrefix) {
				out[k] = v
			}
		}
		return out
	}
	labels, annotations = keep(root.Labels), keep(root.Annotations)
	labels[RootPolicyLabel] = ReplicaName(root)
	labels[ClusterNameLabel] = cluster
	labels[ClusterNSLabel] = cluster
	if len(annotations) == 0 {
		annotations = nil
	}
	return labels, annotations
}

// newReplica builds the object written to the apiserver.
func newReplica(root *policyv1.Policy, cluster string, spec *policyv1.PolicySpec) *policyv1.Policy {
	labels, annotations := replicaMeta(root, cluster)
	return &policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: ReplicaName(root), Namespace: cluster, Labels: labels, Annotations: annotations},
		Spec:       *spec.DeepCopy(),
	}
}

// replicaCurrent says whether an existing replica already is what newReplica would build; hash is
// spec's SpecHash.
func replicaCurrent(existing *CachedReplica, root *policyv1.Policy, hash string) bool {
	return wantMetaOf(root).matches(existing) && specMatches(existing, hash)
}

// wantMeta is replicaMeta for every cluster at once: the labels without the two cluster labels,
// which are the replica's namespace.
type wantMeta struct {
	labels, annotations map[string]string
}

func wantMetaOf(root *policyv1.Policy) wantMeta {
	labels, annotations := replicaMeta(root, "")
	delete(labels, ClusterNameLabel)
	delete(labels, ClusterNSLabel)
	return wantMeta{labels: labels, annotations: annotations}
}

// matches says whether rep has the labels and annotations replicaMeta gives its cluster, its
// cluster labels elided in the cache (CompactReplica) or not.
func (w wantMeta) matches(rep *CachedReplica) bool {
	if !mapsEqual(rep.annotations, w.annotations) {
		return false
	}
	_, elided := rep.labels[clusterLabelsElided]
	if elided {
		if len(rep.labels) != len(w.labels)+1 {
			return false
		}
	} else if len(rep.labels) != len(w.labels)+2 || rep.labels[ClusterNameLabel] != rep.namespace || rep.labels[ClusterNSLabel] != rep.namespace {
		return false
	}
	for k, v := range rep.labels {
		switch k {
		case clusterLabelsElided:
			continue
		case ClusterNameLabel, ClusterNSLabel:
			if elided {
				return false
			}
			continue
		}
		if w, ok := w.labels[k]; !ok || w != v {
			return false
		}
	}
	return true
}

func mapsEqual(a, b map[string]string) bool {
	return len(a) == len(b) && maps.Equal(a, b)
}
