package rollout

import (
	"testing"
	"time"

	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// remembered says whether the planner holds a settled decision for the sim's root.
func (s *sim) remembered() bool {
	_, ok := s.planner.settled.m.Load(s.in.Root)
	return ok
}

// A root whose decision changes nothing is answered again from memory, and the answer is the one
// a fresh decision gives (sim.plan compares them at every step); any change of its input
// decides anew.
func TestPlan_ASettledRootIsRememberedUntilItsInputChanges(t *testing.T) {
	s := newSim(t, AsIs, clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}, oneGroup("c1", "c2", "c3"))
	s.plan() // records every cluster Progressing: a change, not remembered
	if s.remembered() {
		t.Fatal("a decision that changed the clusters' statuses was remembered")
	}
	s.plan()
	if !s.remembered() {
		t.Fatal("a decision that changed nothing was not remembered")
	}
	eq(t, "aggregate from memory", s.plan().Aggregate, policyv1.RolloutProgressing)
	s.answer(policyv1.NonCompliant, "c2")
	d := s.plan()
	eq(t, "failing after c2 answered", d.Failing, []string{"c2"})
	d = s.plan()
	eq(t, "failing from memory", d.Failing, []string{"c2"})
	eq(t, "aggregate from memory", d.Aggregate, policyv1.RolloutProgressing)
	s.answer(policyv1.Compliant, "c1", "c2", "c3")
	s.plan()
	eq(t, "aggregate once all answered", s.plan().Aggregate, policyv1.RolloutSucceeded)

	// A new placement decision is a new input.
	s.in.Groups = oneGroup("c1", "c2", "c3", "c4")
	d = s.plan()
	eq(t, "aggregate with a new cluster", d.Aggregate, policyv1.RolloutProgressing)
	eq(t, "new cluster", d.Clusters["c4"].Status, policyv1.RolloutProgressing)

	s.planner.Forget(s.in.Root)
	if s.remembered() {
		t.Fatal("Forget left the root's decision")
	}
}

// Clusters in flight under a progress deadline time out with time alone, so the same input gets
// another answer later: such a decision is never remembered.
func TestPlan_InFlightClustersUnderADeadlineAreDecidedAgain(t *testing.T) {
	all := clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All, All: &clusterv1alpha1.RolloutAll{
		RolloutConfig: clusterv1alpha1.RolloutConfig{ProgressDeadline: "1m"}}}
	s := newSim(t, AsIs, all, oneGroup("c1", "c2"))
	s.plan()
	s.plan()
	if s.remembered() {
		t.Fatal("a decision with clusters in flight under a deadline was remembered")
	}
	s.clock.Step(2 * time.Minute)
	eq(t, "timed out", s.plan().TimedOut, []string{"c1", "c2"})
}
