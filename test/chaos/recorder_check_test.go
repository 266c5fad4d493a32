package chaos

import (
	"testing"

	"k8s.io/apimachinery/pkg/watch"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// The checks the chaos tests rely on must be able to fail: these histories are built by hand.
func TestOutOfTurn_FlagsOnlyEnforcementBeforeEarlierGroupsAreCompliantAtTheVersion(t *testing.T) {
	groups := map[string]int{"canary": 0, "wave": 1}
	inform, enforce := policyv1.Inform, policyv1.Enforce
	obs := func(cluster string, gen int64, version string, r policyv1.RemediationAction, c policyv1.ComplianceState, evaluated int64) observation {
		return observation{event: watch.Modified, cluster: cluster, generation: gen, version: version,
			remediation: r, compliance: c, evaluatedAt: evaluated}
	}
	for _, tc := range []struct {
		name string
		seen []observation
		want int
	}{
		{"in turn", []observation{
			obs("canary", 1, "chaos-v1", inform, "", 0), obs("wave", 1, "chaos-v1", inform, "", 0),
			obs("canary", 2, "chaos-v1", enforce, "", 0), obs("canary", 2, "chaos-v1", enforce, policyv1.Compliant, 2),
			obs("wave", 2, "chaos-v1", enforce, "", 0)}, 0},
		{"later group enforced while the canary is not yet Compliant", []observation{
			obs("canary", 2, "chaos-v1", enforce, policyv1.NonCompliant, 2), obs("wave", 2, "chaos-v1", enforce, "", 0),
			obs("wave", 2, "chaos-v1", enforce, policyv1.Compliant, 2)}, 1},
		{"Compliant at the previous version does not count for the next", []observation{
			obs("canary", 2, "chaos-v1", enforce, policyv1.Compliant, 2), obs("wave", 2, "chaos-v1", enforce, "", 0),
			obs("canary", 3, "chaos-v2", inform, policyv1.Compliant, 2), obs("wave", 3, "chaos-v2", enforce, "", 0)}, 1},
		{"the canary itself may enforce at once", []observation{obs("canary", 1, "chaos-v1", enforce, "", 0)}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outOfTurn(tc.seen, groups); len(got) != tc.want {
				t.Errorf("outOfTurn = %v, want %d violations", got, tc.want)
			}
		})
	}
}

func TestLostOrDuplicated_FlagsDeletionsRecreationsAndMissingReplicas(t *testing.T) {
	seen := []observation{
		{event: watch.Added, cluster: "a", uid: "1"}, {event: watch.Modified, cluster: "a", uid: "1"},
		{event: watch.Added, cluster: "b", uid: "2"}, {event: watch.Deleted, cluster: "b", uid: "2"},
		{event: watch.Added, cluster: "b", uid: "3"},
	}
	got := lostOrDuplicated(seen, []string{"a", "b", "c"})
	if len(got) != 3 { // b deleted, b re-created, c never seen
		t.Errorf("lostOrDuplicated = %v, want 3 problems", got)
	}
	if got := lostOrDuplicated(seen[:2], []string{"a"}); len(got) != 0 {
		t.Errorf("lostOrDuplicated of a quiet history = %v, want none", got)
	}
}
