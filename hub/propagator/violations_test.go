package propagator_test

import (
	"fmt"
	"testing"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/reports/rollup"
)

// violationsOf returns the root's per-cluster violations; a cluster without a count is absent.
func violationsOf(root *policyv1.Policy) map[string]int64 {
	out := map[string]int64{}
	for _, l := range root.Status.Status {
		if l.Violations != nil {
			out[l.ClusterName] = *l.Violations
		}
	}
	return out
}

func TestRootStatus_ShowsEachClustersViolationsFromItsRolledUpReport(t *testing.T) {
	e := newEnv(t)
	c1, c2 := e.cluster("c1", nil), e.cluster("c2", nil)
	e.startHub()
	e.rootPolicy("p", policyv1.Inform, nil)
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1, c2)
	e.expectReplicas("p", c1, c2)

	// c1's addon rolls up three failures; c2 has reported nothing.
	summary := &openreportsv1alpha1.Report{
		ObjectMeta: metav1.ObjectMeta{Namespace: c1, Name: e.ns + ".p", Labels: map[string]string{
			rollup.LabelRolledUpBy: rollup.RollupName, rollup.LabelRootPolicy: e.ns + ".p", rollup.LabelCluster: c1}},
		Source:  "regent",
		Summary: openreportsv1alpha1.ReportSummary{Pass: 7, Fail: 3, Warn: 1},
	}
	e.create(summary)
	// A Report in the cluster namespace that is not a roll-up does not count.
	e.create(&openreportsv1alpha1.Report{ObjectMeta: metav1.ObjectMeta{Namespace: c2, Name: e.ns + ".p"}, Source: "other",
		Summary: openreportsv1alpha1.ReportSummary{Fail: 5}})
	e.eventually("c1 shows 3 violations, c2 none", func() (bool, string) {
		v := violationsOf(e.root("p"))
		return len(v) == 1 && v[c1] == 3, fmt.Sprintf("violations %v", v)
	})

	// Fixed on the cluster: the count goes to 0, and stays a count (the cluster did report).
	fleettest.Edit(t, e.c, summary, func(r *openreportsv1alpha1.Report) { r.Summary.Fail = 0; r.Summary.Pass = 10 })
	e.eventually("c1 shows 0 violations", func() (bool, string) {
		v := violationsOf(e.root("p"))
		_, ok := v[c1]
		return ok && v[c1] == 0, fmt.Sprintf("violations %v", v)
	})

	// The summary gone (the policy has no results left there): no count.
	if err := e.c.Delete(e.ctx, summary); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	e.eventually("no violations count without a summary", func() (bool, string) {
		v := violationsOf(e.root("p"))
		return len(v) == 0, fmt.Sprintf("violations %v", v)
	})
}
