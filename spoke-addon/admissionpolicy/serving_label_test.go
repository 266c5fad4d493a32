package admissionpolicy

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
)

// The replicas learn which generation the webhook calls from the serving label on its
// revision: it follows the webhook, onto generation 1 and then onto 2, never on two at once.
func TestServingLabel_FollowsTheWebhookFromRevisionToRevision(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()
	serving := func(name string) bool {
		rev := &kubewardenv1.PolicyRevision{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: name}, rev); err != nil {
			return false
		}
		return rev.Labels[kubewardenv1.ServingLabel] == "true"
	}

	liveLeases(t, c, "label", 0, 1)
	if err := c.Create(ctx, clusterPolicy("label", "label")); err != nil {
		t.Fatal(err)
	}
	waitForPolicy(t, c, "label", "Scheduled", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
		return findCondition(p.Status.Conditions, kubewardenv1.ConditionScheduled) != nil
	})
	if serving("clusterwide-label-g1") {
		t.Fatal("generation 1 labelled serving before any replica was Ready")
	}
	report(t, c, "clusterwide-label-g1", append(readyOn(metav1.ConditionTrue, 0, 1), initializedTrue())...)
	eventually(t, "generation 1 labelled serving", func() bool { return serving("clusterwide-label-g1") })

	p := waitForPolicy(t, c, "label", "serving 1", func(p *kubewardenv1.ClusterAdmissionPolicy) bool { return p.Status.ServingGeneration == 1 })
	update(t, c, p, func() { p.Spec.Module = "file:///policies/v2.wasm" })
	report(t, c, "clusterwide-label-g2", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
	waitForPolicy(t, c, "label", "replica 0 Ready on 2", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
		return p.Generation == 2 && readyReplicas(p.Status, metav1.ConditionTrue) == "0"
	})
	if serving("clusterwide-label-g2") || !serving("clusterwide-label-g1") {
		t.Fatal("the label moved before the webhook did (replica 1 is not Ready on generation 2)")
	}
	report(t, c, "clusterwide-label-g2", readyOn(metav1.ConditionTrue, 1)...)
	eventually(t, "the label on generation 2 only", func() bool {
		return serving("clusterwide-label-g2") && !serving("clusterwide-label-g1")
	})
	if u := webhookURL(t, c, "clusterwide-label"); u == "" || u[len(u)-2:] != "/2" {
		t.Errorf("webhook = %q, want generation 2", u)
	}
}
