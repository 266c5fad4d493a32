package rollout

import (
	"maps"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// planned is s.plan() with the input it decided from, as the hub keeps it for Settles.
func (s *sim) planned() (Input, Decision) {
	in := s.in
	in.Clusters = maps.Clone(s.in.Clusters)
	return in, s.plan()
}

func TestSettles_ATimeOutOutsideTheMandatoryGroupSpendsTheBudgetOnlyOnceRecorded(t *testing.T) {
	groups := sdkv1beta1.ClusterGroupsMap{
		{GroupName: "prod", GroupIndex: 0}:   sets.New("p1", "p2"),
		{GroupName: "canary", GroupIndex: 1}: sets.New("k1"),
		{GroupName: "late", GroupIndex: 2}:   sets.New("l1"),
	}
	strategy := clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup,
		ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{
			MandatoryDecisionGroups: clusterv1alpha1.MandatoryDecisionGroups{
				MandatoryDecisionGroups: []clusterv1alpha1.MandatoryDecisionGroup{{GroupName: "canary"}}},
			RolloutConfig: clusterv1alpha1.RolloutConfig{ProgressDeadline: "2s"},
		}}
	s := newSim(t, Progressive, strategy, groups)
	in, d := s.planned()
	eq(t, "canary first", d.Started, []string{"k1"})
	if !s.planner.Settles(in, d) {
		t.Fatal("a decision that started clusters does not settle; the next one reads them in flight and changes nothing")
	}
	s.answer(policyv1.Compliant, "k1")
	eq(t, "prod next", s.plan().Started, []string{"p1", "p2"})
	s.answer(policyv1.NonCompliant, "p1")
	s.answer(policyv1.Compliant, "p2")
	in, d = s.planned()
	if !s.planner.Settles(in, d) {
		t.Fatalf("a decision recording answers does not settle: %+v", d)
	}
	s.clock.Step(3 * time.Second)
	in, d = s.planned()
	eq(t, "timed out", d.TimedOut, []string{"p1"})
	if d.BudgetSpent {
		t.Skip("sdk-go now counts a TimeOut against the budget in the decision that times it out")
	}
	if s.planner.Settles(in, d) {
		t.Fatalf("the decision timing p1 out says it settles, yet its record spends the budget: %+v", d)
	}
	in, d = s.planned()
	eq(t, "budget spent once p1's TimeOut is recorded", d.BudgetSpent, true)
	eq(t, "aggregate", d.Aggregate, policyv1.RolloutFailed)
	if !s.planner.Settles(in, d) {
		t.Fatalf("the stopped rollout does not settle: %+v", d)
	}
}

func TestSettles_PassOneIsFollowedByTheDecisionThatHandsOutTurns(t *testing.T) {
	s := newSim(t, Progressive, progressive(1, 0, "", 0), oneGroup("c1", "c2"))
	in := s.in
	in.Clusters = map[string]Cluster{}
	d, err := s.planner.FirstPass(in)
	if err != nil {
		t.Fatal(err)
	}
	if s.planner.Settles(in, d) {
		t.Fatalf("pass 1 settles, yet the decision reading its record starts a cluster: %+v", d)
	}
}
