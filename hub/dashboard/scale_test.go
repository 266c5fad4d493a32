package dashboard_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub/dashboard"
)

const (
	bigClusters = 1000
	bigGroups   = 4
	bigFailed   = 7
)

// bigFleet writes a root policy selecting 1,000 clusters in 4 decision groups and the status a
// hub would give it mid-rollout: group 0 succeeded, group 1 enforcing with 7 failures, groups 2
// and 3 waiting. Nothing else runs: the objects are the whole truth. It returns the policy's key.
func (e *env) bigFleet() string {
	e.t.Helper()
	tmpl := `{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"big"},"spec":{"severity":"low","object-templates":[]}}`
	root := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: e.ns},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Enforce,
			PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: []byte(tmpl)}}}}}
	e.create(root)
	perGroup := bigClusters / bigGroups
	now := metav1.NewTime(time.Now())
	root.Status = policyv1.PolicyStatus{RolloutStatus: policyv1.RolloutProgressing,
		Placement: []*policyv1.Placement{{PlacementBinding: "b", Placement: "big"}}}
	for g := range bigGroups {
		var names []string
		for i := range perGroup {
			n := g*perGroup + i
			name := fmt.Sprintf("%s-c%04d", e.ns, n)
			names = append(names, name)
			s := &policyv1.CompliancePerClusterStatus{ClusterName: name, ClusterNamespace: name, LastTransitionTime: &now}
			switch {
			case g == 0:
				s.RolloutStatus, s.ComplianceState = policyv1.RolloutSucceeded, policyv1.Compliant
			case g == 1 && i < bigFailed:
				s.RolloutStatus, s.ComplianceState = policyv1.RolloutFailed, policyv1.NonCompliant
			case g == 1:
				s.RolloutStatus = policyv1.RolloutProgressing
			default:
				s.RolloutStatus = policyv1.RolloutToApply
			}
			root.Status.Status = append(root.Status.Status, s)
		}
		e.decide("big", g, fmt.Sprintf("ring-%d", g), names...)
	}
	if err := e.c.Status().Update(e.ctx, root); err != nil {
		e.t.Fatalf("root status: %v", err)
	}
	return e.ns + "/big"
}

// With 1,000 clusters the page stays a page: counts per group, at most 100 cells per group, 50
// clusters per page in the heat map and the list, a pager and a filter that narrow it.
func TestScale_ThousandClusters_AggregatesAndPages(t *testing.T) {
	e := newEnv(t)
	e.serveWithCache()
	token := e.viewer("scale", true)
	key := e.bigFleet()
	query := "policy=" + key + "&q=" + e.ns + "-c"

	var v dashboard.View
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/dashboard/api/view?"+query, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := e.srv.Client().Do(req)
		if err != nil {
			return false, err.Error()
		}
		defer resp.Body.Close()
		v = dashboard.View{}
		if err := json.NewDecoder(resp.Body).Decode(&v); err != nil {
			return false, err.Error()
		}
		return v.Selected != nil && v.Selected.Key == key && v.Selected.Total == bigClusters && len(v.Selected.Groups) == bigGroups,
			fmt.Sprintf("selected %+v", v.Selected)
	})
	perGroup := bigClusters / bigGroups
	wantStates := []string{"done", "failed", "waiting", "waiting"}
	for i, g := range v.Selected.Groups {
		if g.Total != perGroup || g.State != wantStates[i] || len(g.Cells) != 100 || g.More != perGroup-100 {
			t.Errorf("group %d: total %d, state %s, %d cells + %d more; want %d, %s, 100 + %d",
				i, g.Total, g.State, len(g.Cells), g.More, perGroup, wantStates[i], perGroup-100)
		}
	}
	if g := v.Selected.Groups[1]; g.Counts["Failed"] != bigFailed || g.Counts["Progressing"] != perGroup-bigFailed {
		t.Errorf("group 1 counts %v", g.Counts)
	}
	if v.Clusters.Total != bigClusters || v.Clusters.Pages != 20 || len(v.Clusters.Items) != 50 || len(v.Heat.Clusters) != 50 {
		t.Errorf("clusters: %d in %d pages, %d on the page, %d heat columns; want 1000, 20, 50, 50",
			v.Clusters.Total, v.Clusters.Pages, len(v.Clusters.Items), len(v.Heat.Clusters))
	}

	if b, err := json.Marshal(v); err == nil {
		t.Logf("one view of 1,000 clusters is %d bytes of JSON", len(b))
	}

	p := browser(t)
	p.signIn(e.srv.URL, token, query)
	p.until("four aggregated groups of 250",
		`document.querySelectorAll('#groups .group').length === 4 && document.querySelector('#groups .group[data-index="1"]')?.dataset.state === "failed"`,
		`document.querySelector('#groups')?.innerText.slice(0, 300)`)
	var counts struct {
		Cells, Columns, Rows, Bars int
		More                       []string
		Pager                      string
	}
	p.eval(`({cells: document.querySelectorAll('#groups .cell').length,
		columns: document.querySelectorAll('#heat th.col').length,
		rows: document.querySelectorAll('#clusters tbody tr').length,
		bars: document.querySelectorAll('#groups .group .bar').length,
		more: Array.from(document.querySelectorAll('#groups .more')).map(m => m.dataset.more),
		pager: document.getElementById('page-info').textContent})`, &counts)
	if counts.Cells != 400 || counts.Columns != 50 || counts.Rows != 50 || counts.Bars != 4 || len(counts.More) != 4 || counts.More[0] != "150" {
		t.Errorf("the page renders %+v; want 400 cells (100 per group), 50 heat columns, 50 cluster rows, a bar per group, +150 more per group", counts)
	}
	if counts.Pager != "clusters page 1 of 20 (1000 match)" {
		t.Errorf("pager says %q", counts.Pager)
	}
	p.screenshot("1-thousand-clusters")
	p.run("next page", chromedp.Click("#next", chromedp.ByID))
	first := fmt.Sprintf("%s-c%04d", e.ns, 50)
	p.until("page 2",
		sel(`document.getElementById('page-info').textContent === "clusters page 2 of 20 (1000 match)" && document.querySelector('#clusters tbody tr')?.dataset.cluster === %q`, first),
		`document.getElementById('page-info').textContent`)
	p.run("only failing", chromedp.Click("#failing", chromedp.ByID))
	p.until("the failing clusters alone",
		sel(`document.getElementById('page-info').textContent === "clusters page 1 of 1 (%d match)" && document.querySelectorAll('#groups .cell').length === %d && Array.from(document.querySelectorAll('#groups .cell')).every(c => c.classList.contains('st-Failed'))`, bigFailed, bigFailed),
		`document.getElementById('page-info').textContent + ' / ' + document.querySelectorAll('#groups .cell').length`)
	p.notReloaded()
	p.screenshot("2-failing-only")
}
