package propagator_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub"
)

// replicaWrites returns the hub's writes to each cluster's replicas recorded by q, from the
// since-th write of each cluster on (since nil: all of them).
func replicaWrites(q *requests, clusters []string, since map[string]int) map[string][]string {
	out := map[string][]string{}
	for _, c := range clusters {
		ws := q.matching("/namespaces/" + c + "/policies")
		out[c] = ws[since[c]:]
	}
	return out
}

func counts(ws map[string][]string) map[string]int {
	out := map[string]int{}
	for c, w := range ws {
		out[c] = len(w)
	}
	return out
}

// rolledOutAt says the root's rollout of its current generation succeeded on every one of n
// clusters.
func rolledOutAt(n int) func(*policyv1.Policy) bool {
	return func(r *policyv1.Policy) bool {
		c := meta.FindStatusCondition(r.Status.Conditions, "Rollout")
		return c != nil && c.ObservedGeneration == r.Generation && aggregateIs(policyv1.RolloutSucceeded, n)(r)
	}
}

// expectOnlySpecWrites fails unless each cluster's writes are exactly the creates and updates of
// its replica's spec given, in that order: no rollout status write at all.
func expectOnlySpecWrites(t *testing.T, what string, ws map[string][]string, want ...string) {
	t.Helper()
	for cluster, got := range ws {
		ok := len(got) == len(want)
		for i := 0; ok && i < len(got); i++ {
			ok = strings.HasPrefix(got[i], want[i]+" ") && !strings.Contains(got[i], "/status") &&
				(strings.HasSuffix(got[i], " 200") || strings.HasSuffix(got[i], " 201"))
		}
		if !ok {
			t.Errorf("%s on %s: writes %v, want %v of the replica's spec and nothing else", what, cluster, got, want)
		}
	}
}

// expectReadsAsRecorded fails unless every replica of root reads as the rollout status the root
// records for its cluster, with nothing written in its status.
func (e *env) expectReadsAsRecorded(t *testing.T, root string) {
	t.Helper()
	recorded := statuses(e.root(root))
	for cluster, rep := range e.replicas(root) {
		if rep.Status.RolloutStatus != "" {
			t.Errorf("%s on %s: rollout status %q written, want none (implied by the replica)", root, cluster, rep.Status.RolloutStatus)
		}
		if got := rep.EffectiveRolloutStatus(); got != recorded[cluster] {
			t.Errorf("%s on %s: replica reads as %s, root records %s", root, cluster, got, recorded[cluster])
		}
	}
}

// A progressive rollout costs two requests per replica, both on its spec: its creation as inform
// and its update to enforce when its cluster's turn comes. An edit of the root costs two more:
// the new version as inform, then as enforce. No rollout status is written on the way (ToApply,
// Progressing, Succeeded are what each replica implies at each step), and the Succeeded of the
// previous version needs no overwriting: the spec update makes it the new generation's
// Progressing by itself. docs/benchmarks.md measures it at 10,000 replicas.
func TestHubWrites_ProgressiveRolloutAndEditCostTwoSpecWritesPerReplica(t *testing.T) {
	e := newEnv(t)
	clusters := []string{e.cluster("c1", nil), e.cluster("c2", nil), e.cluster("c3", nil)}
	e.rootPolicy("prog", policyv1.Enforce, &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup})
	e.bind("b", "pl", policySubject("prog"))
	e.decide("pl", 0, "", clusters[0])
	e.decide("pl", 1, "", clusters[1:]...)
	var q requests
	echoes := labeledCounterValue("regent_propagator_echoes_total", "object", "replica")
	e.startHubOn(q.config(), hub.Options{})

	e.drive("prog", compliant, rolledOutAt(3))
	before := controllerMetric("controller_runtime_reconcile_total", "controller")
	e.touchBinding("b")
	e.awaitIdle(before, 1)
	first := replicaWrites(&q, clusters, nil)
	expectOnlySpecWrites(t, "first rollout", first, "POST", "PUT")
	// The enforce updates' own watch events were told from other events (by the resourceVersion
	// the apiserver answered each update with), and the rollout went on without them.
	if got := labeledCounterValue("regent_propagator_echoes_total", "object", "replica"); got <= echoes {
		t.Errorf("no watch event of the hub's 3 enforce updates was taken for their echo (%v before, %v after)", echoes, got)
	}
	e.expectReadsAsRecorded(t, "prog")

	e.edit("prog", func(p *policyv1.Policy) {
		raw := string(p.Spec.PolicyTemplates[0].ObjectDefinition.Raw)
		p.Spec.PolicyTemplates[0].ObjectDefinition.Raw = []byte(strings.Replace(raw, `"low"`, `"high"`, 1))
	})
	e.eventually("the edit reaches every replica as inform first", func() (bool, string) {
		for c, rep := range e.replicas("prog") {
			if !strings.Contains(string(rep.Spec.PolicyTemplates[0].ObjectDefinition.Raw), `"high"`) {
				return false, c + " still carries the previous version"
			}
		}
		return true, ""
	})
	e.drive("prog", compliant, rolledOutAt(3))
	before = controllerMetric("controller_runtime_reconcile_total", "controller")
	e.touchBinding("b")
	e.awaitIdle(before, 1)
	expectOnlySpecWrites(t, "edit", replicaWrites(&q, clusters, counts(first)), "PUT", "PUT")
	e.expectReadsAsRecorded(t, "prog")
}

// Where the rollout's decision differs from what the replica implies, the status is written,
// with the generation it describes; once the replica's spec moves on it is stale (readers take
// the implied one at once) and the hub removes it, so the replica's own field never shows a
// status of an earlier version. Here a root that only informs: a NonCompliant report is its
// rollout's success, where the replica alone would read as Failed.
func TestHubWrites_AStatusWrittenForAnEarlierVersionIsRemoved(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1", nil)
	e.rootPolicy("inform", policyv1.Inform, nil)
	e.bind("b", "pl", policySubject("inform"))
	e.decide("pl", 0, "", c1)
	var q requests
	e.startHubOn(q.config(), hub.Options{})
	e.expectReplicas("inform", c1)
	e.answer("inform", c1, policyv1.NonCompliant)
	var generation int64
	e.eventually("Succeeded written for the generation evaluated", func() (bool, string) {
		rep := e.replicas("inform")[c1]
		c := meta.FindStatusCondition(rep.Status.Conditions, policyv1.RolloutConditionType)
		generation = rep.Generation
		return rep.Status.RolloutStatus == policyv1.RolloutSucceeded && c != nil && c.ObservedGeneration == rep.Generation &&
			rep.EffectiveRolloutStatus() == policyv1.RolloutSucceeded, fmt.Sprintf("status %+v", rep.Status)
	})
	// The test can read the write before the hub's client has its answer and counts it.
	e.eventually("the status write counted", func() (bool, string) {
		return len(q.matching("/namespaces/"+c1+"/policies/", "/status", "PATCH")) > 0, "not yet"
	})
	if got := q.matching("/namespaces/"+c1+"/policies/", "/status", "PATCH"); len(got) != 1 {
		t.Errorf("rollout status writes %v, want one apply", got)
	}

	e.edit("inform", func(p *policyv1.Policy) {
		raw := string(p.Spec.PolicyTemplates[0].ObjectDefinition.Raw)
		p.Spec.PolicyTemplates[0].ObjectDefinition.Raw = []byte(strings.Replace(raw, `"low"`, `"high"`, 1))
	})
	e.eventually("the earlier version's status removed", func() (bool, string) {
		rep := e.replicas("inform")[c1]
		return rep.Generation > generation && rep.Status.RolloutStatus == "" &&
				meta.FindStatusCondition(rep.Status.Conditions, policyv1.RolloutConditionType) == nil &&
				rep.EffectiveRolloutStatus() == policyv1.RolloutProgressing,
			fmt.Sprintf("generation %d, status %+v", rep.Generation, rep.Status)
	})
	if got := statuses(e.root("inform"))[c1]; got != policyv1.RolloutProgressing {
		t.Errorf("root records %s, want Progressing", got)
	}

	// A root that informs yet names a progressive strategy: its replica, inform, would read as
	// waiting for its turn, so Progressing is written. Switched to enforce, the same replica is
	// the new rollout's inform version unchanged and waits (ToApply) indeed: the written status
	// is removed from a status that holds nothing else, the cluster not having reported (and the
	// cluster's turn, next, is its spec update alone).
	e.rootPolicy("waves", policyv1.Inform, progressive(1, clusterv1alpha1.RolloutConfig{}))
	e.bind("b2", "pl", policySubject("waves"))
	e.eventually("Progressing written", func() (bool, string) {
		rep := e.replicas("waves")[c1]
		return rep != nil && rep.Status.RolloutStatus == policyv1.RolloutProgressing, fmt.Sprintf("replica %+v", rep)
	})
	e.edit("waves", func(p *policyv1.Policy) { p.Spec.RemediationAction = policyv1.Enforce })
	e.eventually("Progressing removed", func() (bool, string) {
		rep := e.replicas("waves")[c1]
		recorded := statuses(e.root("waves"))[c1]
		return rep.Status.RolloutStatus == "" && recorded != "" && rep.EffectiveRolloutStatus() == recorded,
			fmt.Sprintf("replica %+v, root records %v", rep.Status, statuses(e.root("waves")))
	})
	for _, w := range q.matching("/namespaces/"+c1+"/policies/", "/status") {
		if !strings.HasSuffix(w, " 200") {
			t.Errorf("status write refused: %s", w)
		}
	}
}
