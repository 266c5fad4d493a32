package propagator_test

import (
	"fmt"
	"testing"
	"time"

	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub"
)

// counterValue is a counter of the hub process's registry.
func counterValue(name string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() == name {
			sum := 0.0
			for _, m := range f.GetMetric() {
				sum += m.GetCounter().GetValue()
			}
			return sum
		}
	}
	return 0
}

// While a rollout progresses, a cluster's answer alone waits for the root's next status write
// (here an hour away), but the answer that completes its group turns the rollout at once, and
// the rollout's end is written at once too: holding back the record never holds back a turn.
func TestRootStatusPace_AnswersWaitButTurnsAndTheEndAreWrittenAtOnce(t *testing.T) {
	e := newEnv(t)
	a, b, c := e.cluster("a", nil), e.cluster("b", nil), e.cluster("c", nil)
	e.rootPolicy("p", policyv1.Enforce, &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup})
	e.bind("bind", "pl", policySubject("p"))
	e.decide("pl", 0, "", a, b)
	e.decide("pl", 1, "", c)
	var q requests
	e.startHubOn(q.config(), hub.Options{RootStatusInterval: time.Hour})
	e.eventually("group 0's turn recorded", func() (bool, string) {
		s := statuses(e.root("p"))
		return s[a] == policyv1.RolloutProgressing && s[b] == policyv1.RolloutProgressing && s[c] == policyv1.RolloutToApply, fmt.Sprint(s)
	})
	patches := len(q.matching("/policies/p/status"))
	held := counterValue("regent_propagator_root_status_held_total")

	e.answerEnforced("p", a, policyv1.Compliant)
	e.eventually("the hub holds a's answer back", func() (bool, string) {
		return counterValue("regent_propagator_root_status_held_total") > held, "no status change held"
	})
	r := e.root("p")
	if s := statuses(r); s[a] != policyv1.RolloutProgressing {
		t.Errorf("a's answer alone was written within the hour: statuses %v", s)
	}
	if got := len(q.matching("/policies/p/status")); got != patches {
		t.Errorf("%d root status writes after a's answer alone, want none", got-patches)
	}

	e.answerEnforced("p", b, policyv1.Compliant)
	e.eventually("b's answer completes group 0 and turns the rollout at once", func() (bool, string) {
		s := statuses(e.root("p"))
		return s[a] == policyv1.RolloutSucceeded && s[b] == policyv1.RolloutSucceeded && s[c] == policyv1.RolloutProgressing, fmt.Sprint(s)
	})
	e.answerEnforced("p", c, policyv1.Compliant)
	e.eventually("the rollout's end is written at once", func() (bool, string) {
		r := e.root("p")
		return rolledOutAt(3)(r) && r.Status.ComplianceState == policyv1.Compliant, fmt.Sprint(statuses(r))
	})
	if got := len(q.matching("/policies/p/status")) - patches; got != 2 {
		t.Errorf("%d root status writes from group 0's first answer to the end, want 2 (the turn, the end)", got)
	}
}

// The interval is a delay, not a loss: an answer held back is written once it has passed, with
// nothing else happening.
func TestRootStatusPace_AHeldAnswerIsWrittenWhenTheIntervalPasses(t *testing.T) {
	e := newEnv(t)
	a, b := e.cluster("a", nil), e.cluster("b", nil)
	e.rootPolicy("p", policyv1.Enforce, &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup})
	e.bind("bind", "pl", policySubject("p"))
	e.decide("pl", 0, "", a, b)
	e.startHubWith(hub.Options{RootStatusInterval: 3 * time.Second})
	e.eventually("group 0's turn recorded", func() (bool, string) {
		s := statuses(e.root("p"))
		return s[a] == policyv1.RolloutProgressing && s[b] == policyv1.RolloutProgressing, fmt.Sprint(s)
	})
	held := counterValue("regent_propagator_root_status_held_total")
	e.answerEnforced("p", a, policyv1.Compliant)
	e.eventually("a's answer written", func() (bool, string) {
		r := e.root("p")
		return statuses(r)[a] == policyv1.RolloutSucceeded && lineOf(r, a).ComplianceState == policyv1.Compliant, fmt.Sprint(statuses(r))
	})
	if counterValue("regent_propagator_root_status_held_total") == held {
		t.Errorf("a's answer was written without being held")
	}
}

func lineOf(r *policyv1.Policy, cluster string) *policyv1.CompliancePerClusterStatus {
	for _, l := range r.Status.Status {
		if l.ClusterName == cluster {
			return l
		}
	}
	return &policyv1.CompliancePerClusterStatus{}
}

// answerEnforced answers for cluster once its replica enforces: the turn is recorded on the root
// before the replica is written, and an answer to the inform replica it had while it waited is an
// answer to a generation the hub has since replaced, which it rightly ignores.
func (e *env) answerEnforced(root, cluster string, state policyv1.ComplianceState) {
	e.t.Helper()
	e.eventually(cluster+" enforced", func() (bool, string) {
		rep := e.replicas(root)[cluster]
		return rep != nil && rep.Spec.RemediationAction == policyv1.Enforce, "not yet"
	})
	e.answer(root, cluster, state)
}
