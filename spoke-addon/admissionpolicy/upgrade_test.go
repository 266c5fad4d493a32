package admissionpolicy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
)

// An AdmissionPolicy of a namespace with a dash had Kubewarden's name before the names became
// injective. After the upgrade its revisions of that name are still its own: the generation they
// hold keeps serving under the new name and no second revision of it is made.
func TestUpgrade_RevisionOfTheEarlierNameKeepsServing(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	ctx := context.Background()
	c, err := client.New(hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	createNamespace(t, c, testNamespace)
	createNamespace(t, c, "team-up")
	p := tenantPolicy("team-up", "p", "up")
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	ref := referenceTo(namespacedPolicyKind, p)
	data, _ := json.Marshal(p.Spec)
	earlier := &kubewardenv1.PolicyRevision{
		ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "namespaced-team-up-p-g1",
			Labels: map[string]string{PolicyLabel: "namespaced-team-up-p", kubewardenv1.PolicyServerLabel: "up"}},
		Spec: kubewardenv1.PolicyRevisionSpec{ObjectReference: ref, PolicyGeneration: 1, Enabled: true, Data: runtime.RawExtension{Raw: data}},
	}
	if err := c.Create(ctx, earlier); err != nil {
		t.Fatal(err)
	}
	c = startController(t, hub.Config)
	liveLeases(t, c, "up", 0)
	report(t, c, earlier.Name, append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
	waitForTenantPolicy(t, c, p, "Active on the earlier revision", func(q *kubewardenv1.AdmissionPolicy) bool {
		return q.Status.Phase == kubewardenv1.PhaseActive && q.Status.ServingGeneration == 1
	})
	w := validatingWebhook(t, c, ref)
	if !strings.HasSuffix(*w.Webhooks[0].ClientConfig.URL, "/validate/namespaced.team-up.p/1") {
		t.Errorf("webhook calls %s, want the new name's path", *w.Webhooks[0].ClientConfig.URL)
	}
	list := &kubewardenv1.PolicyRevisionList{}
	if err := c.List(ctx, list, client.InNamespace(testNamespace), client.MatchingLabels{kubewardenv1.PolicyServerLabel: "up"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 1 {
		t.Errorf("%d revisions of generation 1, want the earlier one only", len(list.Items))
	}
}
