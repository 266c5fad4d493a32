package status_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/cli/status"
	"regent.dev/regent/reports/rollup"
)

func TestWhy_NamesPlacementGroupUnmetDependenciesTemplateMessageAndReport(t *testing.T) {
	e := newEnv(t)
	chosen, left := e.cluster("chosen"), e.cluster("left")
	e.startHub()
	e.rootPolicy("p", &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All}, policyv1.PolicyDependency{
		TypeMeta: metav1.TypeMeta{APIVersion: policyv1.GroupVersion.String(), Kind: "Policy"}, Name: "base", Compliance: policyv1.Compliant})
	e.bind("p", "pl")
	e.decide("pl", 0, "edge", chosen)

	// The spoke holds the template back: its dependency is not Compliant there.
	pending := fmt.Sprintf("Dependencies were not satisfied: Policy %s/base is NonCompliant, want Compliant", e.ns)
	e.eventually("replica on the chosen cluster", func() (bool, string) {
		rep := e.replica("p", chosen)
		if rep == nil {
			return false, "no replica"
		}
		e.report(rep, policyv1.Pending, pending)
		return true, ""
	})
	e.create(&openreportsv1alpha1.Report{
		ObjectMeta: metav1.ObjectMeta{Name: e.ns + ".p", Namespace: chosen, Labels: map[string]string{rollup.LabelRolledUpBy: rollup.RollupName}},
		Summary:    openreportsv1alpha1.ReportSummary{Pass: 4, Fail: 2, Warn: 1},
	})
	e.eventually("the hub records the cluster's compliance", func() (bool, string) {
		_, c := clusterIn(e.readRollout("p"), chosen)
		return c.Compliance == policyv1.Pending, fmt.Sprintf("%+v", c)
	})

	w, err := status.ReadWhy(e.ctx, e.c, e.ns, "p", chosen, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if len(w.Placement) != 1 || !w.Placement[0].Chosen || w.Placement[0].Group != "0 edge" || w.Placement[0].Binding != "bind-p" {
		t.Errorf("placement %+v, want bind-p's Placement pl choosing it in group 0 edge", w.Placement)
	}
	if !w.Selected || w.Rollout == nil || w.Rollout.Compliance != policyv1.Pending {
		t.Errorf("rollout line %+v, want the cluster selected and Pending", w.Rollout)
	}
	if w.Replica == nil || w.Replica.Name != e.ns+".p" || w.Replica.Compliance != policyv1.Pending {
		t.Errorf("replica %+v, want %s.p Pending", w.Replica, e.ns)
	}
	if len(w.Unmet) != 1 || w.Unmet[0] != fmt.Sprintf("Policy %s/base is NonCompliant, want Compliant", e.ns) {
		t.Errorf("unmet %q, want the dependency the spoke named", w.Unmet)
	}
	if len(w.Dependencies) != 1 || !strings.Contains(w.Dependencies[0], "Policy base must be Compliant") {
		t.Errorf("declared dependencies %q", w.Dependencies)
	}
	if len(w.Templates) != 1 || w.Templates[0].Kind != "ConfigurationPolicy" || w.Templates[0].Message != pending {
		t.Errorf("templates %+v, want the ConfigurationPolicy with the spoke's message", w.Templates)
	}
	if w.Report == nil || w.Report.Pass != 4 || w.Report.Fail != 2 || w.Report.Warn != 1 {
		t.Errorf("report %+v, want the rolled-up summary 4 pass, 2 fail, 1 warn", w.Report)
	}

	// A cluster the placement did not choose: said so, with no replica.
	w, err = status.ReadWhy(e.ctx, e.c, e.ns, "p", left, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if w.Selected || w.Replica != nil || len(w.Placement) != 1 || w.Placement[0].Chosen || !strings.Contains(w.Placement[0].Detail, "not in the placement's decisions") {
		t.Errorf("unchosen cluster: selected %v, replica %+v, placement %+v", w.Selected, w.Replica, w.Placement)
	}
	var b strings.Builder
	if err := w.WriteTable(&b, time.Now()); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "not selected: the cluster is in no decision group") {
		t.Errorf("table does not say the cluster is not selected:\n%s", b.String())
	}
}
