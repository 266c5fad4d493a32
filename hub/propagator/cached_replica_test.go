package propagator

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// A compacted replica has no cluster labels of its own; it must still compare equal to the
// replica the hub wants, and unequal to any replica whose labels differ on the apiserver.
func TestCompactReplica_ComparesAsTheReplicaOnTheAPIServer(t *testing.T) {
	root := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"team": "a"}},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform}}
	spec := &root.Spec
	hash := SpecHash(spec)
	cached := func(edit func(labels map[string]string)) *CachedReplica {
		rep := newReplica(root, "c1", spec)
		edit(rep.Labels)
		TrimReplica(rep)
		CompactReplica(rep)
		return NewCachedReplica(rep)
	}
	if rep := cached(func(map[string]string) {}); !replicaCurrent(rep, root, hash) {
		t.Errorf("the replica the hub wrote, compacted, is not current: labels %v", rep.labels)
	}
	for name, edit := range map[string]func(map[string]string){
		"cluster-name edited":         func(l map[string]string) { l[ClusterNameLabel] = "c2" },
		"cluster-namespace removed":   func(l map[string]string) { delete(l, ClusterNSLabel) },
		"both cluster labels removed": func(l map[string]string) { delete(l, ClusterNSLabel); delete(l, ClusterNameLabel) },
		"label added":                 func(l map[string]string) { l["extra"] = "x" },
		"root label edited":           func(l map[string]string) { l["team"] = "b" },
	} {
		if rep := cached(edit); replicaCurrent(rep, root, hash) {
			t.Errorf("%s: the compacted replica compares as current (labels %v)", name, rep.labels)
		}
	}
	// The compacted replica against another cluster's wanted labels.
	rep := cached(func(map[string]string) {})
	want, _ := replicaMeta(root, "c2")
	if labelsMatch(rep, want) {
		t.Errorf("c1's replica matches c2's labels")
	}
}

func TestCompactReplica_IsIdempotentAndLeavesRootsAlone(t *testing.T) {
	root := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"team": "a"}}}
	rep := newReplica(root, "c1", &root.Spec)
	CompactReplica(rep)
	first := rep.Labels
	CompactReplica(rep)
	if len(rep.Labels) != len(first) || !labelsMatch(NewCachedReplica(rep), mustLabels(root, "c1")) {
		t.Errorf("second pass changed the labels: %v, was %v", rep.Labels, first)
	}
	CompactReplica(root)
	if _, ok := root.Labels[clusterLabelsElided]; ok || len(root.Labels) != 1 {
		t.Errorf("a root was compacted: %v", root.Labels)
	}
}

func mustLabels(root *policyv1.Policy, cluster string) map[string]string {
	l, _ := replicaMeta(root, cluster)
	return l
}

func TestSharedMaps_BoundedAndDistinctByContent(t *testing.T) {
	tbl := &mapTable{m: map[string]map[string]string{}}
	a := tbl.get(map[string]string{"a": "bc"})
	if b := tbl.get(map[string]string{"ab": "c"}); len(b) != 1 || b["ab"] != "c" || a["a"] != "bc" {
		t.Errorf("two contents shared a map: %v %v", a, b)
	}
	for i := range maxSharedMaps + 10 {
		tbl.get(map[string]string{"k": string(rune('a' + i%26)), "i": string(rune(i))})
	}
	if len(tbl.m) > maxSharedMaps {
		t.Errorf("table holds %d maps, bound %d", len(tbl.m), maxSharedMaps)
	}
}
