package admissionpolicy

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// TestKubectlWait runs Kubewarden's documented idiom, `kubectl wait --for=condition=PolicyActive`,
// and `--for=condition=Ready` with the real kubectl against the apiserver, the test playing the
// policy server's replicas. kubectl wait takes the first condition of the type it finds, so it
// only means "every live replica" because conditions are unique by type.
func TestKubectlWait(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()
	kubectlBin, err := fleet.Binary(fleet.DefaultBinDir(), "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) (string, error) {
		out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig", hub.Kubeconfig}, args...)...).CombinedOutput()
		return string(out), err
	}
	// met asks kubectl whether the condition holds now: --timeout=0 checks once.
	met := func(condition string) bool {
		out, err := kubectl("wait", "clusteradmissionpolicy/waited", "--for="+condition, "--timeout=0")
		if err != nil && !strings.Contains(out, "timed out") && !strings.Contains(out, "condition not met") {
			t.Fatalf("kubectl wait --for=%s: %v\n%s", condition, err, out)
		}
		return err == nil
	}

	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "waitps"},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 2}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	liveLeases(t, c, "waitps", 0, 1)
	if err := c.Create(ctx, clusterPolicy("waited", "waitps")); err != nil {
		t.Fatal(err)
	}
	p := waitForPolicy(t, c, "waited", "pending", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
		return p.Status.PolicyStatus == kubewardenv1.PolicyStatusPending
	})
	if met("condition=PolicyActive") || met("condition=Ready") {
		t.Fatalf("PolicyActive or Ready met before any replica reported: %+v", p.Status)
	}

	// The documented idiom, started before the policy server reports: it returns once the
	// webhook calls generation 1 on every replica.
	waiter := exec.Command(kubectlBin, "--kubeconfig", hub.Kubeconfig, "wait", "clusteradmissionpolicy/waited",
		"--for=condition=PolicyActive", "--timeout=90s")
	var waited strings.Builder
	waiter.Stdout, waiter.Stderr = &waited, &waited
	if err := waiter.Start(); err != nil {
		t.Fatal(err)
	}
	report(t, c, "clusterwide-waited-g1", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
	waitForPolicy(t, c, "waited", "Ready on replica 0 only", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
		return readyReplicas(p.Status, metav1.ConditionTrue) == "0" && readyReplicas(p.Status, metav1.ConditionUnknown) == "1"
	})
	if met("condition=Ready") || met("condition=PolicyActive") {
		t.Fatal("Ready or PolicyActive met while replica 1 has not loaded generation 1")
	}
	report(t, c, "clusterwide-waited-g1", readyOn(metav1.ConditionTrue, 1)...)
	if err := waiter.Wait(); err != nil {
		t.Fatalf("kubectl wait --for=condition=PolicyActive: %v\n%s", err, waited.String())
	}
	if !met("condition=Ready") || !met("jsonpath={.status.policyStatus}=active") {
		t.Fatal("PolicyActive met, but not Ready or policyStatus active")
	}
	if u := webhookURL(t, c, "clusterwide-waited"); !strings.HasSuffix(u, "/clusterwide-waited/1") {
		t.Fatalf("PolicyActive met, but the webhook calls %q", u)
	}

	// A new generation one replica cannot load: the old one keeps answering (policyStatus
	// stays active) but PolicyActive and Ready are about generation 2 and say it is not served.
	update(t, c, p, func() { p.Spec.Module = "file:///policies/v2.wasm" })
	report(t, c, "clusterwide-waited-g2", append(readyOn(metav1.ConditionTrue, 0), initializedTrue(),
		kubewardenv1.ReplicaStatus{Replica: 1, Ready: metav1.ConditionFalse, Reason: "LoadError", Message: "boom"})...)
	p = waitForPolicy(t, c, "waited", "Failed at generation 2", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
		return p.Generation == 2 && p.Status.Phase == kubewardenv1.PhaseFailed
	})
	if met("condition=PolicyActive") || met("condition=Ready") {
		t.Fatalf("PolicyActive or Ready met while generation 2 cannot load on replica 1: %+v", p.Status.Conditions)
	}
	if !met("condition=Ready=False") || !met("jsonpath={.status.policyStatus}=active") {
		t.Fatalf("want Ready=False and policyStatus active while generation 1 answers: %+v", p.Status)
	}
	if r := meta.FindStatusCondition(p.Status.Conditions, kubewardenv1.ConditionReady); r.Reason != "LoadError" || !strings.Contains(r.Message, "replica 1") {
		t.Errorf("Ready = %+v, want the failing replica's reason and number", r)
	}

	// Every condition is a valid standard condition, unique by type: the apiserver accepted it.
	seen := map[string]bool{}
	for _, cond := range p.Status.Conditions {
		if seen[cond.Type] {
			t.Errorf("condition %s appears twice", cond.Type)
		}
		seen[cond.Type] = true
	}

	report(t, c, "clusterwide-waited-g2", readyOn(metav1.ConditionTrue, 1)...)
	if out, err := kubectl("wait", "clusteradmissionpolicy/waited", "--for=condition=PolicyActive", "--timeout=60s"); err != nil {
		t.Fatalf("generation 2 loaded everywhere, but kubectl wait failed: %v\n%s", err, out)
	}
	if u := webhookURL(t, c, "clusterwide-waited"); !strings.HasSuffix(u, "/clusterwide-waited/2") {
		t.Fatalf("PolicyActive met, but the webhook calls %q", u)
	}

	// The PolicyServer going away makes the policy "scheduled", as in Kubewarden.
	if err := c.Delete(ctx, ps); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	if out, err := kubectl("wait", "clusteradmissionpolicy/waited", "--for=jsonpath={.status.policyStatus}=scheduled", "--timeout=60s"); err != nil {
		t.Fatalf("PolicyServer deleted, policy never scheduled: %v\n%s", err, out)
	}
}
