package dashboard

import (
	"net/url"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

func TestParseServing_ReadsTheSpokesAdmissionMessage(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want AdmissionModel
		ok   bool
	}{
		{"Compliant; ClusterAdmissionPolicy psp is Active, serving generation 2 of 3; Ready=True", AdmissionModel{Kind: "ClusterAdmissionPolicy", Name: "psp", Phase: "Active", Serving: 2, Newest: 3}, true},
		{"AdmissionPolicy x is Pending, serving generation 0 of 1", AdmissionModel{Kind: "AdmissionPolicy", Name: "x", Phase: "Pending", Newest: 1}, true},
		{"NonCompliant; configmaps [a] not found", AdmissionModel{}, false},
		{"Compliant; ClusterAdmissionPolicy psp is Active, serving generation two of 3", AdmissionModel{}, false},
		{"", AdmissionModel{}, false},
	} {
		got, ok := ParseServing(tc.msg)
		if ok != tc.ok || got != tc.want {
			t.Errorf("ParseServing(%q) = %+v, %v; want %+v, %v", tc.msg, got, ok, tc.want, tc.ok)
		}
	}
}

func TestClusterWaits_SaysTurnReportDeadlineOrSoak(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	since := metav1.NewTime(now.Add(-time.Minute))
	cfg := clusterv1alpha1.RolloutConfig{ProgressDeadline: "5m", MinSuccessTime: metav1.Duration{Duration: 3 * time.Minute}}
	for _, tc := range []struct {
		status policyv1.RolloutStatus
		want   string
	}{
		{policyv1.RolloutToApply, "its turn to be enforced"},
		{policyv1.RolloutProgressing, "a compliance report at the current generation; deadline in 4m0s"},
		{policyv1.RolloutSucceeded, "soak time: 2m0s left"},
		{policyv1.RolloutFailed, "NonCompliant at the current generation: counts against the failure budget"},
		{policyv1.RolloutTimeOut, "no report within the progress deadline: counts against the failure budget"},
	} {
		s := &policyv1.CompliancePerClusterStatus{RolloutStatus: tc.status, LastTransitionTime: &since}
		if got, _ := clusterWaits(s, cfg, now); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.status, got, tc.want)
		}
	}
	// Only a running countdown makes the board rebuild with no change to watch.
	if _, counting := clusterWaits(&policyv1.CompliancePerClusterStatus{RolloutStatus: policyv1.RolloutProgressing, LastTransitionTime: &since}, cfg, now); !counting {
		t.Error("a deadline ahead does not count down")
	}
	// Past the soak time a succeeded cluster waits for nothing.
	long := metav1.NewTime(now.Add(-time.Hour))
	if got, counting := clusterWaits(&policyv1.CompliancePerClusterStatus{RolloutStatus: policyv1.RolloutSucceeded, LastTransitionTime: &long}, cfg, now); got != "" || counting {
		t.Errorf("soaked: %q", got)
	}
}

func TestGroupState_DoneFailedActiveWaiting(t *testing.T) {
	for _, tc := range []struct {
		counts map[string]int
		want   string
	}{
		{map[string]int{"Succeeded": 3}, stateDone},
		{map[string]int{"Succeeded": 2, "TimeOut": 1}, stateFailed},
		{map[string]int{"Succeeded": 1, "Progressing": 2}, stateActive},
		{map[string]int{"ToApply": 3}, stateWaiting},
	} {
		if got, _ := groupState(&GroupModel{Counts: tc.counts, Total: 3}); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.counts, got, tc.want)
		}
	}
}

func TestView_PagesAndFiltersClusters(t *testing.T) {
	m := &Model{}
	for _, n := range []string{"a1", "a2", "b1"} {
		m.Clusters = append(m.Clusters, &ClusterModel{Name: n, Failing: n == "a2"})
	}
	if v := m.View(ParseQuery(url.Values{"q": {"a"}})); v.Clusters.Total != 2 || v.Totals.Clusters != 3 || v.Totals.Failing != 1 {
		t.Errorf("filter a: %+v, totals %+v", v.Clusters, v.Totals)
	}
	if v := m.View(ParseQuery(url.Values{"failing": {"1"}})); v.Clusters.Total != 1 || v.Clusters.Items[0].Name != "a2" {
		t.Errorf("failing only: %+v", v.Clusters)
	}
	// A page past the end is the last page; a bad number is the first.
	if p := page([]int{1, 2, 3}, 7, 2); p.Page != 1 || p.Pages != 2 || len(p.Items) != 1 {
		t.Errorf("page past the end: %+v", p)
	}
	if q := ParseQuery(url.Values{"page": {"-3"}, "ppage": {"x"}}); q.Page != 0 || q.PolicyPage != 0 {
		t.Errorf("bad numbers: %+v", q)
	}
}
