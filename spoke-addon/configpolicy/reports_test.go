package configpolicy

import (
	"context"
	"fmt"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyv1 "regent.dev/regent/api/policy/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
)

// TestReportFeed runs the controller and the report feed against a real apiserver: each existing
// object a ConfigurationPolicy evaluates gets the policy's result in its ResourceReport, and the
// results go when the policy stops covering the object or is deleted.
func TestReportFeed(t *testing.T) {
	hub := fleettest.Hub(t)
	ctrl.SetLogger(logr.Discard())
	skip := true
	mgr, err := ctrl.NewManager(hub.Config, ctrl.Options{Scheme: scheme.Scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip, UsePriorityQueue: new(bool)}}) // no priority queue: controller-runtime#3538
	if err != nil {
		t.Fatal(err)
	}
	if err := SetupWithManager(mgr, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := SetupReportFeed(mgr); err != nil {
		t.Fatal(err)
	}
	fleettest.StartManager(t, mgr)
	c, err := client.New(hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()

	namespace(t, c, "feed", nil)
	apply(t, c, configMap("feed", "good", "{mode: strict}")+"\n---\n"+configMap("feed", "bad", "{mode: lax}")+"\n---\n"+
		configMap("feed", "forbidden", "{mode: any}"))
	uid := map[string]string{}
	for _, name := range []string{"good", "bad", "forbidden"} {
		obj, _ := getObject(t, c, "v1", "ConfigMap", "feed", name)
		uid[name] = string(obj.GetUID())
	}
	rules := func(templates string) string {
		return policyYAML("feed", "cm-rules", "inform", `
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: good, namespace: feed}, data: {mode: strict}}
- complianceType: mustnothave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: forbidden, namespace: feed}}
`+templates)
	}
	apply(t, c, rules(`- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: bad, namespace: feed}, data: {mode: strict}}`))
	state(t, c, "feed", "cm-rules", policyv1.NonCompliant)

	key, _ := reportsv1alpha1.PolicyLabelKey(reportsv1alpha1.PolicyScopeCluster, "cm-rules")
	// report waits until the ConfigMap's report holds want ("" = no result of cm-rules) at version.
	report := func(name, want, reason, version string) {
		t.Helper()
		eventually(t, fmt.Sprintf("report of %s holds %q of cm-rules at %q", name, want, version), func() bool {
			r := &reportsv1alpha1.ResourceReport{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: "feed", Name: uid[name]}, r); err != nil {
				return false
			}
			var results []string
			for _, res := range r.Spec.Results {
				if res.Policy == "cm-rules" {
					results = append(results, string(res.Result)+": "+res.Description)
				}
			}
			refs := r.OwnerReferences
			if len(refs) != 1 || string(refs[0].UID) != uid[name] || refs[0].Kind != "ConfigMap" {
				return false
			}
			if want == "" {
				_, labelled := r.Labels[key]
				return len(results) == 0 && !labelled
			}
			return len(results) == 1 && results[0] == fmt.Sprintf("%s: ConfigMap feed/%s: %s", want, name, reason) && r.Labels[key] == version
		})
	}
	report("good", "pass", "Resource found as expected", "1")
	report("bad", "fail", "Resource found but does not match", "1")
	// mustnothave of an existing object fails on that object.
	report("forbidden", "fail", "Resource found but should not exist", "1")

	// The policy no longer covers bad: its result goes; the others move to generation 2.
	apply(t, c, rules(""))
	state(t, c, "feed", "cm-rules", policyv1.NonCompliant)
	report("bad", "", "", "")
	report("good", "pass", "Resource found as expected", "2")

	// The policy deleted: its results go everywhere.
	p := &policyv1.ConfigurationPolicy{}
	p.Namespace, p.Name = "feed", "cm-rules"
	if err := c.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	report("good", "", "", "")
	report("forbidden", "", "", "")
}
