package rollout

import (
	"maps"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// sim plays the propagator and the spokes around the Planner: after each decision every started
// cluster carries the enforced replica, and answer() is what the spokes report.
type sim struct {
	t       *testing.T
	clock   *clocktesting.FakeClock
	planner *Planner
	// fresh decides every step from scratch (no root key, so nothing remembered): the planner
	// must agree with it at every step.
	fresh *Planner
	in    Input
}

// newSim starts a rollout as the propagator does: a progressive one with its pass 1, which
// records every cluster ToApply (its replica informs) before any turn is handed out.
func newSim(t *testing.T, mode Mode, strategy clusterv1alpha1.RolloutStrategy, groups sdkv1beta1.ClusterGroupsMap) *sim {
	c := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	s := &sim{t: t, clock: c, planner: NewPlanner(c), fresh: NewPlanner(c),
		in: Input{Mode: mode, Strategy: strategy, Groups: groups, Clusters: map[string]Cluster{}, Root: "ns/root"}}
	if mode == Progressive {
		d, err := s.planner.FirstPass(s.in)
		if err != nil {
			return s // the test asks for the error itself
		}
		maps.Copy(s.in.Clusters, d.Clusters)
	}
	return s
}

func (s *sim) plan() Decision {
	s.t.Helper()
	unkeyed := s.in
	unkeyed.Root, unkeyed.Clusters = "", maps.Clone(s.in.Clusters)
	want, wantErr := s.fresh.Plan(unkeyed)
	d, err := s.planner.Plan(s.in)
	if err != nil {
		s.t.Fatalf("Plan: %v", err)
	}
	if wantErr != nil || !sameDecision(d, want) {
		s.t.Fatalf("Plan remembering the root decided\n%+v\nwhere a fresh decision is\n%+v (%v)", d, want, wantErr)
	}
	for name, c := range d.Clusters {
		c.Active = c.Status != policyv1.RolloutToApply
		s.in.Clusters[name] = c
	}
	return d
}

// answer makes the named clusters report compliance for their enforced replica.
func (s *sim) answer(state policyv1.ComplianceState, names ...string) {
	for _, n := range names {
		c := s.in.Clusters[n]
		c.Reported = state
		s.in.Clusters[n] = c
	}
}

func (s *sim) withStatus(status policyv1.RolloutStatus) []string {
	var out []string
	for _, n := range sortedNames(sets.KeySet(s.in.Clusters)) {
		if s.in.Clusters[n].Status == status {
			out = append(out, n)
		}
	}
	return out
}

func oneGroup(names ...string) sdkv1beta1.ClusterGroupsMap {
	return sdkv1beta1.ClusterGroupsMap{{GroupIndex: 0}: sets.New(names...)}
}

func progressive(maxConcurrency int, minSuccess time.Duration, deadline string, maxFailures int) clusterv1alpha1.RolloutStrategy {
	return clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{
		MaxConcurrency: intstr.FromInt(maxConcurrency),
		RolloutConfig: clusterv1alpha1.RolloutConfig{
			MinSuccessTime: metav1.Duration{Duration: minSuccess}, ProgressDeadline: deadline,
			MaxFailures: intstr.FromInt(maxFailures)},
	}}
}

func eq(t *testing.T, what string, got, want any) {
	t.Helper()
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func TestPlan_All_StartsEveryClusterAndSucceedsWhenAllAreCompliant(t *testing.T) {
	s := newSim(t, AsIs, clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}, oneGroup("c1", "c2", "c3"))
	d := s.plan()
	eq(t, "progressing", s.withStatus(policyv1.RolloutProgressing), []string{"c1", "c2", "c3"})
	eq(t, "aggregate", d.Aggregate, policyv1.RolloutProgressing)
	s.answer(policyv1.Compliant, "c1", "c2")
	s.answer(policyv1.NonCompliant, "c3")
	d = s.plan()
	eq(t, "aggregate with one non-compliant cluster", d.Aggregate, policyv1.RolloutFailed)
	eq(t, "failing", d.Failing, []string{"c3"})
	eq(t, "budget spent", d.BudgetSpent, false)
	s.answer(policyv1.Compliant, "c3")
	eq(t, "aggregate", s.plan().Aggregate, policyv1.RolloutSucceeded)
}

func TestPlan_Progressive_NeverStartsMoreThanMaxConcurrency(t *testing.T) {
	s := newSim(t, Progressive, progressive(2, 0, "", 0), oneGroup("c1", "c2", "c3", "c4", "c5"))
	var order []string
	for i := 0; i < 10 && len(order) < 5; i++ {
		d := s.plan()
		order = append(order, d.Started...)
		inFlight := s.withStatus(policyv1.RolloutProgressing)
		if len(inFlight) > 2 {
			t.Fatalf("pass %d: %d clusters in flight %v, max concurrency is 2", i, len(inFlight), inFlight)
		}
		s.answer(policyv1.Compliant, inFlight...)
	}
	eq(t, "start order", order, []string{"c1", "c2", "c3", "c4", "c5"})
	eq(t, "aggregate", s.plan().Aggregate, policyv1.RolloutSucceeded)
}

func TestPlan_Progressive_HoldsTheSlotForTheSoakTime(t *testing.T) {
	s := newSim(t, Progressive, progressive(1, 5*time.Minute, "", 0), oneGroup("c1", "c2"))
	eq(t, "first start", s.plan().Started, []string{"c1"})
	s.answer(policyv1.Compliant, "c1")
	d := s.plan()
	eq(t, "started while c1 soaks", d.Started, []string(nil))
	eq(t, "recheck after", *d.RecheckAfter, 5*time.Minute)
	eq(t, "aggregate while soaking", d.Aggregate, policyv1.RolloutProgressing)
	s.clock.Step(4 * time.Minute)
	eq(t, "started before the soak ends", s.plan().Started, []string(nil))
	s.clock.Step(time.Minute)
	eq(t, "started after the soak", s.plan().Started, []string{"c2"})
}

func TestPlan_Progressive_DeadlineTimesOutASilentClusterAndSpendsTheBudget(t *testing.T) {
	s := newSim(t, Progressive, progressive(1, 0, "10m", 0), oneGroup("c1", "c2"))
	d := s.plan()
	eq(t, "recheck at the deadline", *d.RecheckAfter, 10*time.Minute)
	s.clock.Step(10 * time.Minute)
	d = s.plan()
	eq(t, "timed out", d.TimedOut, []string{"c1"})
	eq(t, "budget spent", d.BudgetSpent, true)
	eq(t, "started", d.Started, []string(nil))
	eq(t, "aggregate", d.Aggregate, policyv1.RolloutFailed)
	eq(t, "c2 still waits", s.in.Clusters["c2"].Status, policyv1.RolloutToApply)
}

func TestPlan_Progressive_FailureWithinBudgetContinuesOnceTheFailedClusterTimesOut(t *testing.T) {
	// sdk-go keeps a failed cluster in its window until its deadline: it may still recover.
	s := newSim(t, Progressive, progressive(1, 0, "10m", 1), oneGroup("c1", "c2", "c3"))
	s.plan()
	s.answer(policyv1.NonCompliant, "c1")
	d := s.plan()
	eq(t, "started while c1 may still recover", d.Started, []string(nil))
	s.clock.Step(10 * time.Minute)
	d = s.plan()
	eq(t, "timed out", d.TimedOut, []string{"c1"})
	eq(t, "started after c1 timed out within budget", d.Started, []string{"c2"})
	s.answer(policyv1.NonCompliant, "c2")
	s.clock.Step(10 * time.Minute)
	d = s.plan()
	eq(t, "budget spent after two failures", d.BudgetSpent, true)
	eq(t, "started after two failures", d.Started, []string(nil))
	eq(t, "failing", d.Failing, []string{"c1", "c2"})
	eq(t, "aggregate", d.Aggregate, policyv1.RolloutFailed)
}

func TestPlan_Progressive_ClusterJoiningBeforeAnInFlightOneWaitsForTheSlot(t *testing.T) {
	s := newSim(t, Progressive, progressive(1, 0, "", 0), oneGroup("c2"))
	eq(t, "first start", s.plan().Started, []string{"c2"})
	s.in.Groups = oneGroup("c1", "c2")
	eq(t, "start while c2 is in flight", s.plan().Started, []string(nil))
	s.answer(policyv1.Compliant, "c2")
	eq(t, "start once c2 succeeded", s.plan().Started, []string{"c1"})
}

func TestPlan_ProgressivePerGroup_MandatoryGroupGoesFirstWithZeroTolerance(t *testing.T) {
	groups := sdkv1beta1.ClusterGroupsMap{
		{GroupName: "prod", GroupIndex: 0}:   sets.New("p1", "p2"),
		{GroupName: "canary", GroupIndex: 1}: sets.New("c1"),
	}
	strategy := clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup,
		ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{
			MandatoryDecisionGroups: clusterv1alpha1.MandatoryDecisionGroups{
				MandatoryDecisionGroups: []clusterv1alpha1.MandatoryDecisionGroup{{GroupName: "canary"}}},
			RolloutConfig: clusterv1alpha1.RolloutConfig{MaxFailures: intstr.FromString("100%")},
		}}
	s := newSim(t, Progressive, strategy, groups)
	eq(t, "first group", s.plan().Started, []string{"c1"})
	s.answer(policyv1.NonCompliant, "c1")
	d := s.plan()
	eq(t, "after the mandatory group failed", d.Started, []string(nil))
	s.answer(policyv1.Compliant, "c1")
	eq(t, "after the mandatory group succeeded", s.plan().Started, []string{"p1", "p2"})
}

func TestPlan_ProgressivePerGroup_StopsWhenFailureBudgetSpent(t *testing.T) {
	groups := sdkv1beta1.ClusterGroupsMap{
		{GroupIndex: 0}: sets.New("a1", "a2"),
		{GroupIndex: 1}: sets.New("b1", "b2"),
	}
	strategy := clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup,
		ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{}}
	s := newSim(t, Progressive, strategy, groups)
	eq(t, "group 0", s.plan().Started, []string{"a1", "a2"})
	s.answer(policyv1.Compliant, "a1")
	s.answer(policyv1.NonCompliant, "a2")
	d := s.plan()
	eq(t, "budget spent", d.BudgetSpent, true)
	eq(t, "started", d.Started, []string(nil))
	eq(t, "group 1 waits", s.withStatus(policyv1.RolloutToApply), []string{"b1", "b2"})
}

func TestPlan_Progressive_ClusterAddedAfterSuccessGetsAMiniatureRollout(t *testing.T) {
	s := newSim(t, Progressive, progressive(1, 0, "", 0), oneGroup("c1"))
	s.plan()
	s.answer(policyv1.Compliant, "c1")
	eq(t, "aggregate", s.plan().Aggregate, policyv1.RolloutSucceeded)
	s.in.Groups = oneGroup("c1", "c2")
	// Its pass 1: the new version as inform, although its turn is free at once.
	d := s.plan()
	eq(t, "started in the decision that saw c2 join", d.Started, []string(nil))
	eq(t, "c2", d.Clusters["c2"].Status, policyv1.RolloutToApply)
	eq(t, "aggregate with a new cluster", d.Aggregate, policyv1.RolloutProgressing)
	eq(t, "started once c2 was recorded ToApply", s.plan().Started, []string{"c2"})
	s.answer(policyv1.Compliant, "c2")
	eq(t, "aggregate", s.plan().Aggregate, policyv1.RolloutSucceeded)
}

func TestPlan_Progressive_ClustersJoiningBeforeInFlightOnesFillOnlyFreeSlots(t *testing.T) {
	s := newSim(t, Progressive, progressive(2, 0, "", 0), oneGroup("c1", "c2", "c3"))
	eq(t, "first turn", s.plan().Started, []string{"c1", "c2"})
	s.answer(policyv1.Compliant, "c1")
	eq(t, "second turn", s.plan().Started, []string{"c3"})
	s.in.Groups = oneGroup("a1", "a2", "c1", "c2", "c3")
	eq(t, "start while c2 and c3 are in flight", s.plan().Started, []string(nil))
	s.answer(policyv1.Compliant, "c2")
	eq(t, "start once c2 succeeded", s.plan().Started, []string{"a1"})
}

func TestPlan_Progressive_AnEnforcedReplicaCountsAgainstConcurrency(t *testing.T) {
	// The root lost its record (a restart between writing the replica and the root's status):
	// the enforced replica still takes the only slot.
	s := newSim(t, Progressive, progressive(1, 0, "", 0), oneGroup("c1", "c2"))
	s.in.Clusters["c2"] = Cluster{Active: true}
	d := s.plan()
	eq(t, "started", d.Started, []string(nil))
	eq(t, "progressing", s.withStatus(policyv1.RolloutProgressing), []string{"c2"})
	s.answer(policyv1.Compliant, "c2")
	eq(t, "started once c2 succeeded", s.plan().Started, []string{"c1"})
}

func TestPlan_UnchangedInputsKeepTransitionTimes(t *testing.T) {
	s := newSim(t, Progressive, progressive(1, 0, "", 0), oneGroup("c1", "c2"))
	first := s.plan()
	s.clock.Step(time.Hour)
	second := s.plan()
	for name, c := range first.Clusters {
		if !second.Clusters[name].LastTransitionTime.Equal(c.LastTransitionTime) {
			t.Fatalf("%s: transition time moved without a transition", name)
		}
	}
}

func TestPlan_Progressive_ClusterJoiningDuringASoakInformsFirstAndStartsWhenTheSoakEnds(t *testing.T) {
	s := newSim(t, Progressive, progressive(1, time.Minute, "", 0), oneGroup("c1", "c2"))
	eq(t, "first turn", s.plan().Started, []string{"c1"})
	s.answer(policyv1.Compliant, "c1")
	s.plan()
	// a0 sorts first: the handler's window of one is a0's, while c1 still soaks in it.
	s.in.Groups = oneGroup("a0", "c1", "c2")
	d := s.plan()
	eq(t, "started when a0 joined", d.Started, []string(nil))
	eq(t, "a0", d.Clusters["a0"].Status, policyv1.RolloutToApply)
	eq(t, "recheck at the end of c1's soak", *d.RecheckAfter, time.Minute)
	s.clock.Step(30 * time.Second)
	d = s.plan()
	eq(t, "started during c1's soak", d.Started, []string(nil))
	eq(t, "recheck at the end of c1's soak", *d.RecheckAfter, 30*time.Second)
	s.clock.Step(30 * time.Second)
	eq(t, "started once c1's soak ended", s.plan().Started, []string{"a0"})
}

func sameDecision(a, b Decision) bool {
	norm := func(d Decision) Decision {
		for _, l := range []*[]string{&d.Started, &d.TimedOut, &d.Failing} {
			if len(*l) == 0 {
				*l = nil
			}
		}
		return d
	}
	return reflect.DeepEqual(norm(a), norm(b))
}
