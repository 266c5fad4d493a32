package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	spokeaddon "regent.dev/regent/spoke-addon"
)

// TestRollup_AcrossProcesses runs `regent hub` and `regent spoke-addon` as processes of their own
// over a real hub and managed cluster: a ConfigurationPolicy placed from the hub evaluates existing
// objects, its results reach the cluster's reports, the cluster's summary reaches its namespace on
// the hub, and the root Policy shows the cluster's violation count, which follows a fix.
func TestRollup_AcrossProcesses(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	ctx := context.Background()
	hub := newTestClient(t, f.Hub)
	local := newTestClient(t, f.Managed[0])

	identity, err := spokeaddon.IssueHubIdentity(ctx, f.Hub.Config, "cluster1", 3600)
	if err != nil {
		t.Fatal(err)
	}
	hubKubeconfig := filepath.Join(f.Managed[0].Dir, "hub-identity.kubeconfig")
	if err := fleet.WriteKubeconfig(hubKubeconfig, identity); err != nil {
		t.Fatal(err)
	}
	t.Setenv(cliEnv, "1") // the test binary runs as `regent` in its children
	for name, args := range map[string][]string{
		"regent-hub": {"hub", "--kubeconfig", f.Hub.Kubeconfig, "--metrics-bind-address", "0", "--addon-manager=false"},
		"regent-spoke-addon": {"spoke-addon", "--hub-kubeconfig", hubKubeconfig, "--kubeconfig", f.Managed[0].Kubeconfig,
			"--cluster-name", "cluster1", "--metrics-bind-address", "0", "--rollup-max-results", "5"},
	} {
		p, err := f.StartProcess(name, os.Args[0], args...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if t.Failed() {
				if log, err := os.ReadFile(p.Log); err == nil {
					t.Logf("%s log:\n%s", name, tail(string(log), 4000))
				}
			}
		})
	}

	// On the cluster: one ConfigMap as the policy wants it, one it forbids.
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "good"}, Data: map[string]string{"mode": "strict"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "bad"}},
	} {
		if err := local.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// On the hub: the root policy, bound to a placement that selects cluster1.
	template := `{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"cm-rules"},
"spec":{"remediationAction":"inform","severity":"high","object-templates":[
{"complianceType":"musthave","objectDefinition":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"good","namespace":"apps"},"data":{"mode":"strict"}}},
{"complianceType":"mustnothave","objectDefinition":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"bad","namespace":"apps"}}}]}}`
	decision := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Namespace: "policies", Name: "pl-decision-0", Labels: map[string]string{
		clusterv1beta1.PlacementLabel: "pl", clusterv1beta1.DecisionGroupIndexLabel: "0", clusterv1beta1.DecisionGroupNameLabel: ""}}}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "policies"}},
		&policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: "policies", Name: "cm-rules"}, Spec: policyv1.PolicySpec{
			RemediationAction: policyv1.Inform,
			PolicyTemplates:   []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: []byte(template)}}}}},
		&policyv1.PlacementBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "policies", Name: "b"},
			PlacementRef: policyv1.PlacementSubject{APIGroup: clusterv1beta1.GroupName, Kind: "Placement", Name: "pl"},
			Subjects:     []policyv1.Subject{{APIGroup: policyv1.GroupVersion.Group, Kind: "Policy", Name: "cm-rules"}}},
		decision,
	} {
		if err := hub.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	decision.Status.Decisions = []clusterv1beta1.ClusterDecision{{ClusterName: "cluster1"}}
	if err := hub.Status().Update(ctx, decision); err != nil {
		t.Fatal(err)
	}

	summary := func(pass, fail int) {
		t.Helper()
		fleettest.Eventually(t, 2*time.Minute, func() (bool, string) {
			r := &openreportsv1alpha1.Report{}
			err := hub.Get(ctx, client.ObjectKey{Namespace: "cluster1", Name: "policies.cm-rules"}, r)
			return err == nil && r.Summary.Pass == pass && r.Summary.Fail == fail && len(r.Results) == fail,
				fmt.Sprintf("hub summary cluster1/policies.cm-rules with %d pass, %d fail (%v): %+v, %d results", pass, fail, err, r.Summary, len(r.Results))
		})
	}
	violations := func(want int64) {
		t.Helper()
		fleettest.Eventually(t, time.Minute, func() (bool, string) {
			root := &policyv1.Policy{}
			if err := hub.Get(ctx, client.ObjectKey{Namespace: "policies", Name: "cm-rules"}, root); err != nil {
				return false, err.Error()
			}
			for _, l := range root.Status.Status {
				if l.ClusterName == "cluster1" && l.Violations != nil && *l.Violations == want {
					return true, ""
				}
			}
			return false, fmt.Sprintf("root status with %d violations on cluster1: %s", want, toJSON(root.Status.Status))
		})
	}
	summary(1, 1)
	violations(1)

	// `kubectl get reports -A` on the hub: the cluster's summary with policy-report columns.
	kubectl, err := fleet.Binary(fleet.DefaultBinDir(), "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "--kubeconfig", f.Hub.Kubeconfig, "get", "reports", "-A").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl get reports -A: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAMESPACE NAME PASS FAIL WARN ERROR SKIP AGE" ||
		!strings.HasPrefix(strings.Join(strings.Fields(lines[1]), " "), "cluster1 policies.cm-rules 1 1 0 0 0") {
		t.Errorf("kubectl get reports -A printed:\n%s", out)
	}

	// Fixed on the cluster: the forbidden ConfigMap goes (and its report with it).
	if err := local.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "apps", Name: "bad"}}); err != nil {
		t.Fatal(err)
	}
	summary(1, 0)
	violations(0)
}

func newTestClient(t *testing.T, c *fleet.Cluster) client.Client {
	t.Helper()
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
