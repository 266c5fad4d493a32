package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// TestKubectlPlugin_RolloutStatusExitCodesHelpAndCompletion installs the binary as kubectl-regent
// (and kubectl_complete-regent) and drives it through the real kubectl: kubectl finds the plugin,
// `kubectl regent status rollout` prints the rollout and exits 1 on a Failed one and 0 on a
// Succeeded one, help names the command as kubectl does, and kubectl completes policy names
// through the plugin.
func TestKubectlPlugin_RolloutStatusExitCodesHelpAndCompletion(t *testing.T) {
	binDir := fleet.DefaultBinDir()
	if _, err := os.Stat(filepath.Join(binDir, "kubectl")); err != nil {
		t.Fatalf("kubectl: %v (run make testbin)", err)
	}
	hub := fleettest.Hub(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	plugins := t.TempDir()
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(plugins, "kubectl-regent"), ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	if err := os.Symlink("kubectl-regent", filepath.Join(plugins, "kubectl_complete-regent")); err != nil {
		t.Fatal(err)
	}

	c, err := client.New(hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	recordRollout(ctx, t, c, "broken", policyv1.RolloutFailed, policyv1.NonCompliant, "FailureBudgetSpent", "rollout stopped: the failure budget is spent by cluster1")
	recordRollout(ctx, t, c, "fine", policyv1.RolloutSucceeded, policyv1.Compliant, "Succeeded", "all 1 clusters succeeded")
	recordRollout(ctx, t, c, "slow", policyv1.RolloutProgressing, "", "Progressing", "0 of 1 clusters succeeded")

	kubectl := func(args ...string) (stdout, stderr string, code int) {
		cmd := exec.CommandContext(ctx, filepath.Join(binDir, "kubectl"), args...)
		cmd.Env = append(os.Environ(), "PATH="+plugins+string(os.PathListSeparator)+binDir, "KUBECONFIG="+hub.Kubeconfig)
		var o, e bytes.Buffer
		cmd.Stdout, cmd.Stderr = &o, &e
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			code = exit.ExitCode()
		case err != nil:
			t.Fatalf("kubectl %v: %v", args, err)
		}
		return o.String(), e.String(), code
	}

	out, _, code := kubectl("plugin", "list")
	if code != 0 || !strings.Contains(out, filepath.Join(plugins, "kubectl-regent")) {
		t.Errorf("kubectl plugin list (exit %d) does not list the plugin:\n%s", code, out)
	}

	out, errOut, code := kubectl("regent", "status", "rollout", "broken", "-n", "plugin")
	if code != 1 {
		t.Errorf("rollout status of a Failed rollout exited %d, want 1; stderr:\n%s", code, errOut)
	}
	if !strings.Contains(out, "cluster1") || !strings.Contains(out, "Failed") || !strings.Contains(errOut, "rollout of plugin/broken failed") {
		t.Errorf("failed rollout printed:\n%s\nstderr:\n%s", out, errOut)
	}
	if strings.Contains(errOut, "regent starting") {
		t.Errorf("a tool command logged a start line:\n%s", errOut)
	}

	out, errOut, code = kubectl("regent", "status", "rollout", "fine", "-n", "plugin", "-w")
	if code != 0 || !strings.Contains(out, "rollout plugin/fine: Succeeded") {
		t.Errorf("-w on a succeeded rollout exited %d and printed:\n%s\nstderr:\n%s", code, out, errOut)
	}

	// No hub runs here, so nothing moves: -w gives up at --timeout with exit code 2.
	_, errOut, code = kubectl("regent", "status", "rollout", "slow", "-n", "plugin", "-w", "--timeout", "2s")
	if code != 2 || !strings.Contains(errOut, "timed out waiting for the rollout of plugin/slow") {
		t.Errorf("-w --timeout on a rollout that does not move exited %d; stderr:\n%s", code, errOut)
	}

	out, errOut, code = kubectl("regent", "status", "rollout", "fine", "-n", "plugin", "-o", "json")
	var view struct {
		Status string `json:"status"`
		Groups []struct {
			Clusters []struct{ Name string } `json:"clusters"`
		} `json:"groups"`
	}
	if err := json.Unmarshal([]byte(out), &view); code != 0 || err != nil || view.Status != "Succeeded" || len(view.Groups) != 1 || view.Groups[0].Clusters[0].Name != "cluster1" {
		t.Errorf("-o json exited %d (%v) with:\n%s\nstderr:\n%s", code, err, out, errOut)
	}

	out, errOut, code = kubectl("regent", "status", "why", "broken", "cluster1", "-n", "plugin", "-o", "yaml")
	if code != 0 || !strings.Contains(out, "chosen: true") || !strings.Contains(out, "status: Failed") {
		t.Errorf("why -o yaml exited %d with:\n%s\nstderr:\n%s", code, out, errOut)
	}

	// The spoke view, here of the hub's own apiserver: its root policies, no admission policy.
	out, errOut, code = kubectl("regent", "status")
	if code != 0 || !strings.Contains(out, "plugin/broken") || !strings.Contains(out, "ADMISSION POLICY") {
		t.Errorf("status exited %d with:\n%s\nstderr:\n%s", code, out, errOut)
	}

	out, _, _ = kubectl("regent", "status", "rollout", "--help")
	if !strings.Contains(out, "kubectl regent status rollout POLICY") {
		t.Errorf("help does not name the command as kubectl runs it:\n%s", out)
	}

	// kubectl completes a plugin's arguments by running kubectl_complete-regent.
	out, errOut, _ = kubectl("__complete", "regent", "status", "rollout", "-n", "plugin", "")
	if lines := strings.Split(out, "\n"); len(lines) < 4 || lines[0] != "broken" || lines[1] != "fine" || lines[2] != "slow" {
		t.Errorf("completion of policy names gave:\n%s\nstderr:\n%s", out, errOut)
	}
}

// recordRollout creates a root bound to a placement choosing cluster1, with the status the hub
// records when the rollout ended as given.
func recordRollout(ctx context.Context, t *testing.T, c client.Client, name string, rollout policyv1.RolloutStatus, compliance policyv1.ComplianceState, reason, message string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil && !strings.Contains(err.Error(), "already exists") {
			t.Fatal(err)
		}
	}
	must(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plugin"}}))
	must(c.Create(ctx, &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"}}))
	must(c.Create(ctx, &clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Name: "pl", Namespace: "plugin"}}))
	d := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: "pl-decision-0", Namespace: "plugin",
		Labels: map[string]string{clusterv1beta1.PlacementLabel: "pl", clusterv1beta1.DecisionGroupIndexLabel: "0"}}}
	if err := c.Create(ctx, d); err == nil {
		d.Status.Decisions = []clusterv1beta1.ClusterDecision{{ClusterName: "cluster1"}}
		must(c.Status().Update(ctx, d))
	}
	root := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "plugin"}, Spec: policyv1.PolicySpec{
		RemediationAction: policyv1.Enforce,
		PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{
			Raw: []byte(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"` + name + `"},"spec":{}}`)}}}}}
	must(c.Create(ctx, root))
	must(c.Create(ctx, &policyv1.PlacementBinding{ObjectMeta: metav1.ObjectMeta{Name: "bind-" + name, Namespace: "plugin"},
		PlacementRef: policyv1.PlacementSubject{APIGroup: clusterv1beta1.GroupName, Kind: "Placement", Name: "pl"},
		Subjects:     []policyv1.Subject{{APIGroup: policyv1.GroupVersion.Group, Kind: "Policy", Name: name}}}))
	now := metav1.Now()
	condition := metav1.ConditionFalse
	if rollout == policyv1.RolloutSucceeded {
		condition = metav1.ConditionTrue
	}
	root.Status = policyv1.PolicyStatus{ComplianceState: compliance, RolloutStatus: rollout,
		Placement: []*policyv1.Placement{{PlacementBinding: "bind-" + name, Placement: "pl"}},
		Status: []*policyv1.CompliancePerClusterStatus{{ClusterName: "cluster1", ClusterNamespace: "cluster1", ComplianceState: compliance,
			RolloutStatus:      rollout,
			LastTransitionTime: &now}},
		Conditions: []metav1.Condition{{Type: "Rollout", Status: condition, Reason: reason, Message: message, ObservedGeneration: root.Generation, LastTransitionTime: now}}}
	must(c.Status().Update(ctx, root))
}
