package hub

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	regentscheme "regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub/propagator"
)

// OCM users alert on policy_governance_info; its values and labels must be OCM's, read from
// what the apiserver holds, and a deleted policy must leave no series behind.
func TestGovernanceInfo_OCMsLabelsAndValuesFromTheCache(t *testing.T) {
	hub := fleettest.Hub(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cl, err := client.New(hub.Config, client.Options{Scheme: regentscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"gov-policies", "gov-cluster1"} {
		if err := cl.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	root := func(name string, disabled bool, state policyv1.ComplianceState) *policyv1.Policy {
		p := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "gov-policies"},
			Spec: policyv1.PolicySpec{Disabled: disabled, RemediationAction: policyv1.Inform, PolicyTemplates: []*policyv1.PolicyTemplate{}}}
		if err := cl.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		p.Status.ComplianceState = state
		if err := cl.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	root("compliant", false, policyv1.Compliant)
	gone := root("deleted-later", false, policyv1.NonCompliant)
	root("off", true, policyv1.NonCompliant)
	replica := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "gov-policies.compliant", Namespace: "gov-cluster1",
		Labels: map[string]string{propagator.RootPolicyLabel: "gov-policies.compliant"}},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform, PolicyTemplates: []*policyv1.PolicyTemplate{}}}
	if err := cl.Create(ctx, replica); err != nil {
		t.Fatal(err)
	}
	replica.Status.ComplianceState = policyv1.NonCompliant
	if err := cl.Status().Update(ctx, replica); err != nil {
		t.Fatal(err)
	}

	c, err := cache.New(hub.Config, cache.Options{Scheme: regentscheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// Before the cache has listed the policies there is no family rather than a partial one.
	unsynced := &governanceMetrics{registry: prometheus.NewRegistry(), cache: c, log: logr.Discard()}
	if families, err := unsynced.Gather(); err != nil || len(families) != 0 {
		t.Errorf("unsynced cache: %d families (%v), want none", len(families), err)
	}
	go func() { _ = c.Start(ctx) }()
	if _, err := c.GetInformer(ctx, &policyv1.Policy{}); err != nil {
		t.Fatal(err)
	}
	c.WaitForCacheSync(ctx)
	reg := prometheus.NewRegistry()
	// Families on either side of policy_governance_info by name, served alongside it.
	before, after := prometheus.NewCounter(prometheus.CounterOpts{Name: "aaa_total", Help: "a"}), prometheus.NewCounter(prometheus.CounterOpts{Name: "zzz_total", Help: "z"})
	reg.MustRegister(before, after)
	// The name is the hub's: held in the registry, by the first hub as by a second in the process.
	for range 2 {
		if err := reserveGovernanceInfo(reg); err != nil {
			t.Fatal(err)
		}
	}
	other := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "policy_governance_info", Help: "x"}, []string{"policy"})
	if err := reg.Register(other); err == nil {
		t.Error("the registry took a second collector of policy_governance_info")
	}
	gov := &governanceMetrics{registry: reg, cache: c, log: logr.Discard()}
	const header = "# HELP policy_governance_info The compliance status of the named policy. 0 == Compliant. 1 == NonCompliant. -1 == Unknown/Pending\n# TYPE policy_governance_info gauge\n"
	want := header + `policy_governance_info{cluster_namespace="<null>",policy="compliant",policy_namespace="gov-policies",type="root"} 0
policy_governance_info{cluster_namespace="<null>",policy="deleted-later",policy_namespace="gov-policies",type="root"} 1
policy_governance_info{cluster_namespace="gov-cluster1",policy="compliant",policy_namespace="gov-policies",type="propagated"} 1
`
	fleettest.Eventually(t, 30*time.Second, func() (bool, string) {
		err := testutil.GatherAndCompare(gov, strings.NewReader(want), "policy_governance_info")
		return err == nil, errString(err)
	})
	families, err := gov.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range families {
		names = append(names, f.GetName())
	}
	if want := []string{"aaa_total", "policy_governance_info", "zzz_total"}; !slices.Equal(names, want) {
		t.Errorf("families %v, want %v", names, want)
	}
	// The metrics server's /metrics answers from gov; its other paths are left to their handlers.
	filter, err := gov.filterProvider(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	handler, err := filter(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("next")) }))
	if err != nil {
		t.Fatal(err)
	}
	for path, want := range map[string]string{"/metrics": `policy_governance_info{cluster_namespace="gov-cluster1",policy="compliant",policy_namespace="gov-policies",type="propagated"} 1`, "/debug/other": "next"} {
		rec := httptest.NewRecorder()
		handler.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("GET %s: %q does not hold %q", path, rec.Body.String(), want)
		}
	}
	expectScrapesAsGathered(t, gov, handler)
	if err := cl.Delete(ctx, gone); err != nil {
		t.Fatal(err)
	}
	want = header + `policy_governance_info{cluster_namespace="<null>",policy="compliant",policy_namespace="gov-policies",type="root"} 0
policy_governance_info{cluster_namespace="gov-cluster1",policy="compliant",policy_namespace="gov-policies",type="propagated"} 1
`
	fleettest.Eventually(t, 30*time.Second, func() (bool, string) {
		err := testutil.GatherAndCompare(gov, strings.NewReader(want), "policy_governance_info")
		return err == nil, errString(err)
	})
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
