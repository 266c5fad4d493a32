package propagator_test

import (
	"testing"

	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// The echo of the hub's own root status patch reconciles nothing, so a decision that its own
// record changes must be taken again by the hub itself, at once. Pass 1 of a progressive rollout
// is one: it records every cluster ToApply and hands out no turn; the decision reading that record
// does. A decision its record leaves as it is (strategy All, or a turn handed out) waits for news.
func TestHubWrites_ADecisionItsOwnRecordChangesIsTakenAgainAtOnce(t *testing.T) {
	e := newEnv(t)
	clusters := []string{e.cluster("c1", nil), e.cluster("c2", nil)}
	e.rootPolicy("prog", policyv1.Enforce, progressive(1, clusterv1alpha1.RolloutConfig{}))
	e.rootPolicy("all", policyv1.Enforce, &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All})
	e.bind("b", "pl", policySubject("prog"), policySubject("all"))
	e.decide("pl", 0, "", clusters...)
	direct, err := client.New(hubCluster.Config, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	r := e.reconciler(hubCluster.Config, &indexReader{Reader: direct})
	reconcile := func(name string) ctrl.Result {
		t.Helper()
		res, err := r.Reconcile(e.ctx, ctrl.Request{NamespacedName: e.key(name)})
		if err != nil {
			t.Fatalf("reconcile %s: %v", name, err)
		}
		return res
	}

	if res := reconcile("prog"); res.RequeueAfter != propagator.DecideAgain {
		t.Fatalf("pass 1 (record %v) requeued after %v, want %v: the decision reading its record hands out the turns",
			statuses(e.root("prog")), res.RequeueAfter, propagator.DecideAgain)
	}
	if got := enforcing(e.replicas("prog")); len(got) != 0 {
		t.Fatalf("pass 1 started %v", got)
	}
	// The turn's replica goes first; its record may wait for the root's status interval.
	res := reconcile("prog")
	if got := enforcing(e.replicas("prog")); len(got) != 1 {
		t.Fatalf("the decision after pass 1 started %v, want one cluster (maxConcurrency 1)", got)
	}
	if res.RequeueAfter == propagator.DecideAgain {
		t.Errorf("a decision that its record leaves as it is was taken again")
	}
	// Nothing changed since: nothing is written, nothing decided again.
	before := e.root("prog").ResourceVersion
	if res := reconcile("prog"); res.RequeueAfter == propagator.DecideAgain {
		t.Errorf("a settled root was decided again")
	}
	if after := e.root("prog").ResourceVersion; after != before {
		t.Errorf("a settled root was written: resourceVersion %s, then %s", before, after)
	}

	if res := reconcile("all"); res.RequeueAfter == propagator.DecideAgain {
		t.Errorf("strategy All (record %v) was decided again", statuses(e.root("all")))
	}
	if got := enforcing(e.replicas("all")); len(got) != len(clusters) {
		t.Errorf("strategy All enforces on %v, want every cluster", got)
	}
}

func enforcing(replicas map[string]*policyv1.Policy) []string {
	var out []string
	for cluster, rep := range replicas {
		if rep.Spec.RemediationAction == policyv1.Enforce {
			out = append(out, cluster)
		}
	}
	return out
}
