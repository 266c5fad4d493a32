package propagator_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
)

func progressive(maxConcurrency int, cfg clusterv1alpha1.RolloutConfig) *clusterv1alpha1.RolloutStrategy {
	return &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{
		MaxConcurrency: intstr.FromInt(maxConcurrency), RolloutConfig: cfg}}
}

// drive plays every spoke: an enforced replica not yet evaluated at its generation gets the
// answer for its cluster ("" stays silent). It returns once done holds for the root.
func (e *env) drive(root string, answer func(cluster string) policyv1.ComplianceState, done func(*policyv1.Policy) bool) {
	e.t.Helper()
	e.eventually("rollout of "+root, func() (bool, string) {
		r := e.root(root)
		if done(r) {
			return true, ""
		}
		for cluster, rep := range e.replicas(root) {
			if rep.Spec.RemediationAction == policyv1.Enforce && rep.Status.LastEvaluatedGeneration != rep.Generation {
				if a := answer(cluster); a != "" {
					e.answer(root, cluster, a)
				}
			}
		}
		return false, fmt.Sprintf("rollout %s, clusters %v", r.Status.RolloutStatus, statuses(r))
	})
}

func compliant(string) policyv1.ComplianceState { return policyv1.Compliant }

func aggregateIs(s policyv1.RolloutStatus, clusters int) func(*policyv1.Policy) bool {
	return func(r *policyv1.Policy) bool { return r.Status.RolloutStatus == s && len(r.Status.Status) == clusters }
}

// expectNoViolations fails the test if the concurrency bound was exceeded in any observed state,
// and returns the order in which clusters were first enforced. Whether the bound was also
// reached is not asked of the watch: a spoke that answers between two of the hub's writes
// lowers the peak a watch sees without anything being wrong, so tests that need clusters to
// start together check the rollout's status or its RolloutStarted events instead.
func expectNoViolations(t *testing.T, iw *inFlightWatch) []string {
	t.Helper()
	violations, peak, order := iw.check()
	for _, v := range violations {
		t.Errorf("concurrency exceeded: %s", v)
	}
	if peak == 0 {
		t.Errorf("no cluster was ever enforced")
	}
	return order
}

func TestRollout_Progressive_NeverExceedsMaxConcurrencyAndJoinsAddedClusters(t *testing.T) {
	e := newEnv(t)
	var clusters []string
	for i := 1; i <= 5; i++ {
		clusters = append(clusters, e.cluster(fmt.Sprintf("c%d", i), nil))
	}
	e.startHub()
	iw := e.watchInFlight("p", 2)
	e.rootPolicy("p", policyv1.Enforce, progressive(2, clusterv1alpha1.RolloutConfig{}))
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", clusters...)
	e.expectReplicas("p", clusters...)

	// Pass 1 then the first turn: every cluster has the policy, two enforce it.
	e.eventually("first turn", func() (bool, string) {
		r := e.root("p")
		return len(withStatus(r, policyv1.RolloutProgressing)) == 2 && len(withStatus(r, policyv1.RolloutToApply)) == 3,
			fmt.Sprint(statuses(r))
	})
	for cluster, action := range iw.firstCarrying(`"severity"`) {
		if action != policyv1.Inform {
			t.Errorf("%s's replica was created as %s, want inform (pass 1)", cluster, action)
		}
	}

	// Two clusters done, a cluster joins mid-rollout with a name before every other.
	e.drive("p", compliant, func(r *policyv1.Policy) bool { return len(withStatus(r, policyv1.RolloutSucceeded)) >= 2 })
	early := e.cluster("a0", nil)
	e.decide("pl", 0, "", append(clusters, early)...)
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 6))

	// A cluster added after success gets a miniature rollout of its own.
	late := e.cluster("z9", nil)
	e.decide("pl", 0, "", append(clusters, early, late)...)
	e.eventually("aggregate back to Progressing", func() (bool, string) {
		r := e.root("p")
		return r.Status.RolloutStatus == policyv1.RolloutProgressing, string(r.Status.RolloutStatus)
	})
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 7))

	order := expectNoViolations(t, iw)
	if len(order) != 7 {
		t.Errorf("enforced %v, want each of the 7 clusters once", order)
	}
}

func TestRollout_Progressive_SoakTimeHoldsTheSlot(t *testing.T) {
	e := newEnv(t)
	c1, c2 := e.cluster("c1", nil), e.cluster("c2", nil)
	e.startHub()
	e.rootPolicy("p", policyv1.Enforce, progressive(1, clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: 2 * time.Second}}))
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1, c2)
	e.eventually("c1 enforced", func() (bool, string) {
		r := e.replicas("p")[c1]
		return r != nil && r.Spec.RemediationAction == policyv1.Enforce, "not yet"
	})
	e.answer("p", c1, policyv1.Compliant)
	e.eventually("c1 succeeded", func() (bool, string) {
		s := statuses(e.root("p"))
		if s[c1] == policyv1.RolloutSucceeded && s[c2] != policyv1.RolloutToApply {
			t.Fatalf("c2 started in the same pass c1 succeeded, before its soak time: %v", s)
		}
		return s[c1] == policyv1.RolloutSucceeded, fmt.Sprint(s)
	})
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 2))
}

func TestRollout_Progressive_DeadlineTimesOutASilentCluster(t *testing.T) {
	e := newEnv(t)
	c1, c2 := e.cluster("c1", nil), e.cluster("c2", nil)
	e.startHub()
	e.rootPolicy("p", policyv1.Enforce, progressive(1, clusterv1alpha1.RolloutConfig{ProgressDeadline: "2s", MaxFailures: intstr.FromInt(1)}))
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1, c2)
	silentC1 := func(c string) policyv1.ComplianceState {
		if c == c1 {
			return ""
		}
		return policyv1.Compliant
	}
	e.drive("p", silentC1, aggregateIs(policyv1.RolloutFailed, 2))
	s := statuses(e.root("p"))
	if s[c1] != policyv1.RolloutTimeOut || s[c2] != policyv1.RolloutSucceeded {
		t.Fatalf("statuses %v, want %s TimeOut and %s Succeeded", s, c1, c2)
	}
	// TimeOut is no status a replica implies: it is written, after the root's record.
	e.eventually("TimeOut on the replica", func() (bool, string) {
		rep := e.replicas("p")[c1]
		return rep.Status.RolloutStatus == policyv1.RolloutTimeOut && rep.EffectiveRolloutStatus() == policyv1.RolloutTimeOut,
			fmt.Sprintf("replica rollout status %q", rep.Status.RolloutStatus)
	})
}

func TestRollout_ProgressivePerGroup_MandatoryFirstThenStopsWhenFailureBudgetSpent(t *testing.T) {
	e := newEnv(t)
	p1, p2, k1, l1 := e.cluster("p1", nil), e.cluster("p2", nil), e.cluster("k1", nil), e.cluster("l1", nil)
	e.startHub()
	iw := e.watchInFlight("p", 2)
	e.rootPolicy("p", policyv1.Enforce, &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup,
		ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{MandatoryDecisionGroups: clusterv1alpha1.MandatoryDecisionGroups{
			MandatoryDecisionGroups: []clusterv1alpha1.MandatoryDecisionGroup{{GroupName: "canary"}}},
			// sdk-go keeps a failed cluster in flight until its deadline, since it may recover.
			RolloutConfig: clusterv1alpha1.RolloutConfig{ProgressDeadline: "2s"}}})
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "prod", p1, p2)
	e.decide("pl", 1, "canary", k1)
	e.decide("pl", 2, "late", l1)
	e.eventually("canary first", func() (bool, string) {
		s := statuses(e.root("p"))
		return s[k1] == policyv1.RolloutProgressing && len(s) == 4, fmt.Sprint(s)
	})
	p1Fails := func(c string) policyv1.ComplianceState {
		if c == p1 {
			return policyv1.NonCompliant
		}
		return policyv1.Compliant
	}
	e.drive("p", p1Fails, func(r *policyv1.Policy) bool {
		s := statuses(r)
		return r.Status.RolloutStatus == policyv1.RolloutFailed && s[p2] == policyv1.RolloutSucceeded
	})
	r := e.root("p")
	if s := statuses(r); s[l1] != policyv1.RolloutToApply || s[p1] != policyv1.RolloutTimeOut {
		t.Fatalf("statuses %v: want %s failed (TimeOut past its deadline) and %s still ToApply", s, p1, l1)
	}
	c := meta.FindStatusCondition(r.Status.Conditions, "Rollout")
	if c == nil || c.Reason != "FailureBudgetSpent" || !strings.Contains(c.Message, p1) {
		t.Fatalf("Rollout condition %+v, want FailureBudgetSpent naming %s", c, p1)
	}
	e.eventually("RolloutStopped event", func() (bool, string) {
		return e.hasEvent("p", "RolloutStopped", p1), "no event"
	})
	e.eventually("the prod group started in one decision", func() (bool, string) {
		return e.hasEvent("p", "RolloutStarted", p1+", "+p2) || e.hasEvent("p", "RolloutStarted", p2+", "+p1), "no RolloutStarted event names both"
	})
	order := expectNoViolations(t, iw)
	if len(order) == 0 || order[0] != k1 {
		t.Errorf("enforced in order %v, want the canary %s first", order, k1)
	}
	for _, c := range order {
		if c == l1 {
			t.Errorf("%s enforced after the budget was spent", l1)
		}
	}
}

func (e *env) hasEvent(root, reason, mention string) bool {
	list := &eventsv1.EventList{}
	if err := e.c.List(e.ctx, list, client.InNamespace(e.ns)); err != nil {
		return false
	}
	for _, ev := range list.Items {
		if ev.Regarding.Name == root && ev.Reason == reason && strings.Contains(ev.Note, mention) {
			return true
		}
	}
	return false
}

func TestRollout_SpecChangeMidRolloutRestartsFromPass1(t *testing.T) {
	e := newEnv(t)
	c1, c2, c3 := e.cluster("c1", nil), e.cluster("c2", nil), e.cluster("c3", nil)
	e.startHub()
	iw := e.watchInFlight("p", 1)
	e.rootPolicy("p", policyv1.Enforce, progressive(1, clusterv1alpha1.RolloutConfig{}))
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1, c2, c3)
	// c1 answers, c2 gets its turn and does not answer: the edit comes mid-rollout. The replica
	// says so, not the root, whose record of the turn may be held back (root_status_pace.go).
	onlyC1 := func(cluster string) policyv1.ComplianceState {
		if cluster == c1 {
			return policyv1.Compliant
		}
		return ""
	}
	e.drive("p", onlyC1, func(*policyv1.Policy) bool {
		rep := e.replicas("p")[c2]
		return rep != nil && rep.Spec.RemediationAction == policyv1.Enforce
	})

	e.edit("p", func(root *policyv1.Policy) {
		root.Spec.PolicyTemplates[0].ObjectDefinition = runtime.RawExtension{Raw: []byte(
			`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"p"},"spec":{"severity":"high","object-templates":[]}}`)}
	})
	gen := e.root("p").Generation
	e.eventually("pass 1: the new version reaches every cluster as inform", func() (bool, string) {
		first := iw.firstCarrying(`"high"`)
		return len(first) == 3, fmt.Sprint(first)
	})
	for cluster, action := range iw.firstCarrying(`"high"`) {
		if action != policyv1.Inform {
			t.Errorf("the new version reached %s as %s first, want inform (pass 1)", cluster, action)
		}
	}
	e.eventually("new version everywhere, one cluster enforced", func() (bool, string) {
		r := e.root("p")
		c := meta.FindStatusCondition(r.Status.Conditions, "Rollout")
		if c == nil || c.ObservedGeneration != gen {
			return false, "rollout not restarted"
		}
		enforced := 0
		for _, rep := range e.replicas("p") {
			if !strings.Contains(string(rep.Spec.PolicyTemplates[0].ObjectDefinition.Raw), "high") {
				return false, "old version on " + rep.Namespace
			}
			if rep.Spec.RemediationAction == policyv1.Enforce {
				enforced++
			}
		}
		return enforced == 1 && len(withStatus(r, policyv1.RolloutToApply)) == 2, fmt.Sprint(statuses(r))
	})
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 3))
	expectNoViolations(t, iw)
}

func TestRollout_HubRestartMidRolloutKeepsEveryInvariant(t *testing.T) {
	e := newEnv(t)
	var clusters []string
	for i := 1; i <= 6; i++ {
		clusters = append(clusters, e.cluster(fmt.Sprintf("c%d", i), nil))
	}
	e.startHub()
	iw := e.watchInFlight("p", 2)
	e.rootPolicy("p", policyv1.Enforce, progressive(2, clusterv1alpha1.RolloutConfig{}))
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", clusters...)
	e.drive("p", compliant, func(r *policyv1.Policy) bool { return len(withStatus(r, policyv1.RolloutSucceeded)) >= 2 })
	e.stopHub()
	// While no hub runs, the spokes keep answering.
	for cluster, rep := range e.replicas("p") {
		if rep.Spec.RemediationAction == policyv1.Enforce && rep.Status.LastEvaluatedGeneration != rep.Generation {
			e.answer("p", cluster, policyv1.Compliant)
		}
	}
	e.startHub()
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 6))
	order := expectNoViolations(t, iw)
	if len(order) != 6 {
		t.Errorf("enforced %v, want each of the 6 clusters once", order)
	}
}

func TestRollout_All_EnforcesEveryClusterAtOnce(t *testing.T) {
	e := newEnv(t)
	c1, c2 := e.cluster("c1", nil), e.cluster("c2", nil)
	e.startHub()
	e.rootPolicy("p", policyv1.Enforce, &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All})
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1, c2)
	e.eventually("both enforced", func() (bool, string) {
		reps := e.replicas("p")
		return len(reps) == 2 && reps[c1].Spec.RemediationAction == policyv1.Enforce && reps[c2].Spec.RemediationAction == policyv1.Enforce, "not yet"
	})
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 2))
	if r := e.root("p"); r.Status.ComplianceState != policyv1.Compliant {
		t.Errorf("aggregate compliance %q, want Compliant", r.Status.ComplianceState)
	}
}
