package admissionpolicy

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// tenantPolicy is an AdmissionPolicy of namespace ns served by policy server ps, on pods.
func tenantPolicy(ns, name, ps string) *kubewardenv1.AdmissionPolicy {
	return &kubewardenv1.AdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: clusterPolicy(name, ps).Spec.PolicySpec}
}

func createNamespace(t testing.TB, c client.Client, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// serve plays every replica of the policy's server: generation 1 is Ready, so the controller
// writes the webhook configuration.
func serve(t testing.TB, c client.Client, p *kubewardenv1.AdmissionPolicy) kubewardenv1.PolicyReference {
	t.Helper()
	ref := referenceTo(namespacedPolicyKind, p)
	report(t, c, ref.RevisionName(1), append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
	return ref
}

func waitForTenantPolicy(t testing.TB, c client.Client, p *kubewardenv1.AdmissionPolicy, what string, cond func(*kubewardenv1.AdmissionPolicy) bool) {
	t.Helper()
	eventually(t, "AdmissionPolicy "+p.Namespace+"/"+p.Name+" "+what, func() bool {
		return c.Get(context.Background(), client.ObjectKeyFromObject(p), p) == nil && cond(p)
	})
}

func validatingWebhook(t testing.TB, c client.Client, ref kubewardenv1.PolicyReference) *admissionregistrationv1.ValidatingWebhookConfiguration {
	t.Helper()
	w := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	eventually(t, "webhook configuration of "+ref.Namespace+"/"+ref.Name, func() bool {
		return c.Get(context.Background(), client.ObjectKey{Name: webhookName(ref.ServerPolicyName())}, w) == nil
	})
	return w
}

// warnedWith tells whether a Warning event with reason on the named object says fragment.
func warnedWith(t testing.TB, c client.Client, ns, name, reason, fragment string) bool {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Type == corev1.EventTypeWarning && e.Reason == reason && strings.Contains(e.Note, fragment) {
			return true
		}
	}
	return false
}
