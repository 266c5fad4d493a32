package propagator_test

import (
	"slices"
	"testing"

	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// Two placements bind one root. The hub starts after every object exists so its first decision
// already sees both placements: what is tested is the order, not how fast a binding is noticed.

func TestRollout_TwoPlacements_PerGroupTakesOnePlacementsGroupsThenTheNext(t *testing.T) {
	e := newEnv(t)
	// Cluster names sort against the expected order, so a rollout by name would fail.
	a1, a2, b1 := e.cluster("z-a1", nil), e.cluster("m-a2", nil), e.cluster("a-b1", nil)
	// pl-b's decision is written first and its group index is 0: neither may put it before
	// pl-a's groups, because placements are taken in name order.
	e.decide("pl-b", 0, "", b1)
	e.decide("pl-a", 0, "first", a1)
	e.decide("pl-a", 1, "second", a2)
	e.bind("b-b", "pl-b", policySubject("p"))
	e.bind("b-a", "pl-a", policySubject("p"))
	iw := e.watchInFlight("p", 1)
	e.rootPolicy("p", policyv1.Enforce, &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup})
	e.startHub()
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 3))
	order := expectNoViolations(t, iw)
	if want := []string{a1, a2, b1}; !slices.Equal(order, want) {
		t.Errorf("enforced in order %v, want %v: pl-a's groups in index order, then pl-b's", order, want)
	}
}

func TestRollout_TwoPlacements_ProgressiveTakesTheUnionOnce(t *testing.T) {
	e := newEnv(t)
	a1, both, b1 := e.cluster("a1", nil), e.cluster("both", nil), e.cluster("b1", nil)
	e.decide("pl-a", 0, "", a1, both)
	e.decide("pl-b", 0, "", both, b1)
	e.bind("b-a", "pl-a", policySubject("p"))
	e.bind("b-b", "pl-b", policySubject("p"))
	iw := e.watchInFlight("p", 1)
	e.rootPolicy("p", policyv1.Enforce, progressive(1, clusterv1alpha1.RolloutConfig{}))
	e.startHub()
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 3))
	order := expectNoViolations(t, iw)
	slices.Sort(order)
	if want := []string{a1, b1, both}; !slices.Equal(order, want) {
		t.Errorf("enforced %v, want each of %v exactly once", order, want)
	}
	if n := len(e.replicas("p")); n != 3 {
		t.Errorf("%d replicas, want 3: a cluster chosen by both placements gets one", n)
	}
}
