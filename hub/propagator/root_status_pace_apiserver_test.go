package propagator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
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

// labeledCounterValue is the value of the counter name whose label is value.
func labeledCounterValue(name, label, value string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// While a rollout progresses, its clusters' answers and the turns they complete wait for the
// root's next status write (here an hour away): each group's replicas enforce, and are answered,
// while the root still records them waiting. The rollout's end is written at once, and with it
// everything held.
func TestRootStatusPace_AnswersAndTurnsWaitButTheEndIsWrittenAtOnce(t *testing.T) {
	e := newEnv(t)
	a, b, c := e.cluster("a", nil), e.cluster("b", nil), e.cluster("c", nil)
	e.rootPolicy("p", policyv1.Enforce, &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup})
	e.bind("bind", "pl", policySubject("p"))
	e.decide("pl", 0, "", a, b)
	e.decide("pl", 1, "", c)
	var q requests
	e.startHubOn(q.config(), hub.Options{RootStatusInterval: time.Hour})
	e.eventually("pass 1 recorded", func() (bool, string) {
		s := statuses(e.root("p"))
		return len(s) == 3, fmt.Sprint(s)
	})
	// As for the end below: pass 1's write can be read before it returned and was counted, and
	// would then be counted among the writes after it.
	e.eventually("pass 1's write counted", func() (bool, string) {
		return len(q.matching("/policies/p/status")) > 0, "not yet"
	})
	patches := len(q.matching("/policies/p/status"))

	e.answerEnforced("p", a, policyv1.Compliant)
	e.answerEnforced("p", b, policyv1.Compliant)
	e.answerEnforced("p", c, policyv1.Compliant)
	e.eventually("the rollout's end is written at once", func() (bool, string) {
		r := e.root("p")
		return rolledOutAt(3)(r) && r.Status.ComplianceState == policyv1.Compliant, fmt.Sprint(statuses(r))
	})
	// The test can read the end before the hub's write of it has returned and been counted.
	e.eventually("the end's write counted", func() (bool, string) {
		return len(q.matching("/policies/p/status")) > patches, "not yet"
	})
	if got := len(q.matching("/policies/p/status")) - patches; got != 1 {
		t.Errorf("%d root status writes from pass 1 to the end, want 1 (the end): the turns and answers wait; all: %v", got, q.matching("/policies/p"))
	}
	if counterValue("regent_propagator_root_status_held_total") == 0 {
		t.Errorf("nothing was held back")
	}
	// The steps held back are announced when written, both groups' in one Event per reason.
	e.eventually("events for the turns held back and the end", func() (bool, string) {
		return e.hasEvent("p", "RolloutGroupStarted", "decision group index 0 started; decision group index 1 started") &&
			e.hasEvent("p", "RolloutGroupCompleted", "index 0: every cluster succeeded; decision group index 1") &&
			e.hasEvent("p", "RolloutStarted", c) && e.hasEvent("p", "RolloutSucceeded", ""), e.eventNotes("p")
	})
}

// A turn is written before its replicas when a progress deadline counts from it: held, the
// start would be stamped anew by every reconcile until written, and the deadline would run late.
func TestRootStatusPace_WithADeadlineTheTurnIsWrittenAtOnce(t *testing.T) {
	e := newEnv(t)
	a, b := e.cluster("a", nil), e.cluster("b", nil)
	e.rootPolicy("p", policyv1.Enforce, &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup,
		ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{RolloutConfig: clusterv1alpha1.RolloutConfig{ProgressDeadline: "1h"}}})
	e.bind("bind", "pl", policySubject("p"))
	e.decide("pl", 0, "", a)
	e.decide("pl", 1, "", b)
	e.startHubWith(hub.Options{RootStatusInterval: time.Hour})
	e.eventually("group 0's turn recorded within the hour", func() (bool, string) {
		s := statuses(e.root("p"))
		return s[a] == policyv1.RolloutProgressing && s[b] == policyv1.RolloutToApply, fmt.Sprint(s)
	})
	e.answerEnforced("p", a, policyv1.Compliant)
	e.eventually("group 1's turn recorded within the hour", func() (bool, string) {
		s := statuses(e.root("p"))
		return s[b] == policyv1.RolloutProgressing, fmt.Sprint(s)
	})
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
	// Held by its route (replica_answers.go) or, reconciled for something else, by the status.
	heldCount := func() float64 {
		return counterValue("regent_propagator_root_status_held_total") + labeledCounterValue("regent_propagator_replica_answers_total", "route", "held")
	}
	held := heldCount()
	e.answerEnforced("p", a, policyv1.Compliant)
	e.eventually("a's answer written", func() (bool, string) {
		r := e.root("p")
		return statuses(r)[a] == policyv1.RolloutSucceeded && lineOf(r, a).ComplianceState == policyv1.Compliant, fmt.Sprint(statuses(r))
	})
	if heldCount() == held {
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

// answerEnforced answers for cluster once its replica enforces: an answer to the inform replica
// it had while it waited is an answer to a generation the hub has since replaced, which it
// rightly ignores.
func (e *env) answerEnforced(root, cluster string, state policyv1.ComplianceState) {
	e.t.Helper()
	e.eventually(cluster+" enforced", func() (bool, string) {
		rep := e.replicas(root)[cluster]
		return rep != nil && rep.Spec.RemediationAction == policyv1.Enforce, "not yet"
	})
	e.answer(root, cluster, state)
}

// eventNotes lists the reasons and notes of root's Events, for a failure's message.
func (e *env) eventNotes(root string) string {
	list := &eventsv1.EventList{}
	if err := e.c.List(e.ctx, list, client.InNamespace(e.ns)); err != nil {
		return err.Error()
	}
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.Name == root {
			out = append(out, ev.Reason+": "+ev.Note)
		}
	}
	return strings.Join(out, "; ")
}
