package dashboard_test

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
)

// A progressive rollout driven by the real hub propagator, watched in a real browser: the page
// shows the canary group enforcing while the waves wait, then, without a reload, the canary done
// and the first wave enforcing, then a cluster of that wave failing in red, in the rollout, the
// heat map and the cluster list, with its report counts and its admission policy's serving
// generation beside it.
func TestBrowser_RolloutMovesGroupToGroup_FailingClusterShowsRed(t *testing.T) {
	p := browser(t)
	e := newEnv(t)
	canary, a1, a2, b1, b2 := e.cluster("canary"), e.cluster("a1"), e.cluster("a2"), e.cluster("b1"), e.cluster("b2")
	e.serveWithHub()
	token := e.viewer("watcher", true)

	tmpl := `{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"p"},"spec":{"severity":"low","object-templates":[]}}`
	e.create(&policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: e.ns},
		Spec: policyv1.PolicySpec{
			RemediationAction: policyv1.Enforce,
			RolloutStrategy:   &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup, ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{}},
			PolicyTemplates:   []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: []byte(tmpl)}}},
		},
	})
	e.create(&policyv1.PlacementBinding{
		ObjectMeta:   metav1.ObjectMeta{Name: "b", Namespace: e.ns},
		PlacementRef: policyv1.PlacementSubject{APIGroup: clusterv1beta1.GroupName, Kind: "Placement", Name: "pl"},
		Subjects:     []policyv1.Subject{{APIGroup: policyv1.GroupVersion.Group, Kind: "Policy", Name: "p"}},
	})
	e.decide("pl", 0, "canary", canary)
	e.decide("pl", 1, "wave-1", a1, a2)
	e.decide("pl", 2, "wave-2", b1, b2)
	// The roll-up of a1's reports, as the spoke writes it to the hub.
	e.create(&openreportsv1alpha1.Report{
		ObjectMeta: metav1.ObjectMeta{Name: e.ns + ".p", Namespace: a1, Labels: map[string]string{"reports.regent.dev/rolled-up-by": "regent-reports-rollup"}},
		Summary:    openreportsv1alpha1.ReportSummary{Pass: 5, Fail: 3},
	})

	p.signIn(e.srv.URL, token, "policy="+e.ns+"/p&q="+e.ns+"-")
	group := func(i int) string { return sel(`document.querySelector('#groups .group[data-index="%d"]')`, i) }
	groupStates := `Array.from(document.querySelectorAll('#groups .group')).map(g => g.dataset.group + '=' + g.dataset.state).join(', ') + ' after ' + document.body.dataset.updates + ' updates'`
	p.until("the canary enforcing while the waves wait",
		group(0)+`?.dataset.state === "active" && `+group(1)+`?.dataset.state === "waiting" && `+group(2)+`?.dataset.state === "waiting"`,
		groupStates)
	var waits string
	p.eval(sel(`document.querySelector('.group[data-index="1"] .waiting').textContent`), &waits)
	if waits == "" {
		t.Error("a waiting group does not say what it waits for")
	}
	p.screenshot("1-canary-enforcing")

	e.answerWhenEnforced("p", canary, policyv1.Compliant, nil)
	p.until("the canary done and wave-1 enforcing",
		group(0)+`?.dataset.state === "done" && `+group(1)+`?.dataset.state === "active" && `+group(2)+`?.dataset.state === "waiting"`,
		groupStates)
	p.notReloaded()
	p.screenshot("2-wave-1-enforcing")

	serving := "Compliant; ClusterAdmissionPolicy psp is Active, serving generation 2 of 3; Ready=True"
	e.answerWhenEnforced("p", a2, policyv1.Compliant, &serving)
	e.answerWhenEnforced("p", a1, policyv1.NonCompliant, nil)
	cell := sel(`document.querySelector('#groups .cell[data-cluster="%s"]')`, a1)
	p.until("a1 failed, in red, in the rollout",
		cell+`?.dataset.status === "Failed" && `+cell+`.classList.contains("st-Failed") && `+group(1)+`.dataset.state === "failed"`,
		groupStates+` + ' / a1: ' + `+cell+`?.className`)
	var colour, failColour string
	p.eval(`getComputedStyle(`+cell+`).backgroundColor`, &colour)
	p.eval(`(() => { const s = document.createElement('span'); s.style.color = getComputedStyle(document.documentElement).getPropertyValue('--fail'); document.body.append(s); const c = getComputedStyle(s).color; s.remove(); return c })()`, &failColour)
	if colour != failColour {
		t.Errorf("the failed cell's background is %s, the page's failure colour is %s", colour, failColour)
	}
	heat := sel(`document.querySelector('#heat td[data-cluster="%s"]')`, a1)
	row := sel(`document.querySelector('#clusters tr[data-cluster="%s"]')`, a1)
	p.until("a1 NonCompliant in the heat map and failing in the cluster list with its report counts",
		heat+`?.classList.contains("c-NonCompliant") && `+row+`?.classList.contains("failing") && `+row+`.querySelector('[data-report="fail"]').textContent === "3"`,
		heat+`?.className + ' / ' + `+row+`?.outerHTML`)
	admission := sel(`document.querySelector('#clusters tr[data-cluster="%s"] .admission[data-name="psp"]')`, a2)
	p.until("a2's admission policy serving generation 2 of 3",
		admission+`?.dataset.serving === "2" && `+admission+`.dataset.newest === "3" && `+admission+`.classList.contains("lagging")`,
		sel(`document.querySelector('#clusters tr[data-cluster="%s"]')?.outerHTML`, a2))
	var rolloutStatus string
	p.eval(sel(`document.querySelector('#rollouts tr[data-policy="%s/p"]').dataset.status`, e.ns), &rolloutStatus)
	if rolloutStatus != string(policyv1.RolloutFailed) && rolloutStatus != string(policyv1.RolloutProgressing) {
		t.Errorf("the rollouts table shows %s/p as %q", e.ns, rolloutStatus)
	}
	p.notReloaded()
	p.screenshot("3-a1-failed")
	var updates string
	p.eval(`document.body.dataset.updates`, &updates)
	t.Logf("the page took %s updates through server-sent events", updates)
}

// decide writes the placement's decision for one group, as OCM's placement controller would.
func (e *env) decide(placement string, group int, groupName string, clusters ...string) {
	e.t.Helper()
	d := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-decision-%d", placement, group), Namespace: e.ns,
		Labels: map[string]string{
			clusterv1beta1.PlacementLabel:          placement,
			clusterv1beta1.DecisionGroupIndexLabel: fmt.Sprint(group),
			clusterv1beta1.DecisionGroupNameLabel:  groupName,
		}}}
	e.create(d)
	for _, c := range clusters {
		d.Status.Decisions = append(d.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: c})
	}
	if err := e.c.Status().Update(e.ctx, d); err != nil {
		e.t.Fatalf("decision %s: %v", d.Name, err)
	}
}

// answerWhenEnforced plays cluster's spoke: once the hub enforces the replica, it reports state
// at the replica's generation, with an admission policy's compliance message when given.
func (e *env) answerWhenEnforced(root, cluster string, state policyv1.ComplianceState, admission *string) {
	e.t.Helper()
	rep := &policyv1.Policy{}
	fleettest.Eventually(e.t, time.Minute, func() (bool, string) {
		if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: cluster, Name: e.ns + "." + root}, rep); err != nil {
			return false, err.Error()
		}
		return rep.Spec.RemediationAction == policyv1.Enforce, fmt.Sprintf("replica on %s is %s", cluster, rep.Spec.RemediationAction)
	})
	status := map[string]any{"compliant": state, "lastEvaluatedGeneration": rep.Generation}
	if admission != nil {
		status["details"] = []map[string]any{{"templateMeta": map[string]any{"name": "psp"}, "compliant": state,
			"history": []map[string]any{{"message": *admission, "lastTimestamp": time.Now().UTC().Format(time.RFC3339)}}}}
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := e.c.Status().Patch(e.ctx, rep, client.RawPatch(types.MergePatchType, patch)); err != nil {
		e.t.Fatalf("answer for %s: %v", cluster, err)
	}
}
