package admissionpolicy

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
)

// TestTenancy shares one apiserver and controller between the specifications of tenant
// isolation by name: no tenant's AdmissionPolicy writes or deletes what another policy owns.
func TestTenancy(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()

	// Kubewarden names both namespaced-tenant-x-p: on the landed code the second one's revision
	// and webhook configuration were the first one's.
	t.Run("CollidingKubewardenNames_EachTenantKeepsItsOwnWebhooksAndRevisions", func(t *testing.T) {
		liveLeases(t, c, "collide", 0)
		createNamespace(t, c, "tenant")
		createNamespace(t, c, "tenant-x")
		first, second := tenantPolicy("tenant", "x-p", "collide"), tenantPolicy("tenant-x", "p", "collide")
		for _, p := range []*kubewardenv1.AdmissionPolicy{first, second} {
			if err := c.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
		}
		for _, p := range []*kubewardenv1.AdmissionPolicy{first, second} {
			ref := serve(t, c, p)
			w := validatingWebhook(t, c, ref)
			if got := w.Webhooks[0].NamespaceSelector.MatchLabels[namespaceNameLabel]; got != p.Namespace {
				t.Errorf("%s/%s: webhook %s selects namespace %q", p.Namespace, p.Name, w.Name, got)
			}
			waitForTenantPolicy(t, c, p, "Active", func(q *kubewardenv1.AdmissionPolicy) bool { return q.Status.Phase == kubewardenv1.PhaseActive })
		}
		if err := c.Delete(ctx, first); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the first policy is gone", func() bool {
			return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(first), first))
		})
		ref := referenceTo(namespacedPolicyKind, second)
		rev := &kubewardenv1.PolicyRevision{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: ref.RevisionName(1)}, rev); err != nil {
			t.Errorf("the other tenant's revision: %v", err)
		}
		w := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: webhookName(ref.ServerPolicyName())}, w); err != nil {
			t.Errorf("the other tenant's webhook configuration: %v", err)
		}
	})

	t.Run("WebhookConfigurationOfAnotherOwner_NeitherOverwrittenNorDeleted", func(t *testing.T) {
		liveLeases(t, c, "taken", 0)
		createNamespace(t, c, "taken")
		p := tenantPolicy("taken", "p", "taken")
		ref := referenceTo(namespacedPolicyKind, p)
		// Left by another tenant's policy under a name this one now derives (a name of the
		// landed scheme, which collided).
		ignore := admissionregistrationv1.Ignore
		none := admissionregistrationv1.SideEffectClassNone
		url := "https://127.0.0.1:9443/other"
		theirs := &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: webhookName(ref.ServerPolicyName()),
				Annotations: map[string]string{policyRefAnnotation: "AdmissionPolicy/taken-p/other"}},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "other.policies.regent.dev",
				ClientConfig:  admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: testCA},
				FailurePolicy: &ignore, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
		}
		if err := c.Create(ctx, theirs); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		serve(t, c, p)
		waitForTenantPolicy(t, c, p, "Failed with a Conflict naming the owner", func(q *kubewardenv1.AdmissionPolicy) bool {
			cond := findCondition(q.Status.Conditions, conditionConflict)
			return q.Status.Phase == kubewardenv1.PhaseFailed && q.Status.ServingGeneration == 0 && cond != nil &&
				strings.Contains(cond.Message, "belongs to AdmissionPolicy taken-p/other")
		})
		eventually(t, "a Warning event on the policy", func() bool {
			return warnedWith(t, c, "taken", "p", "OwnedByAnotherPolicy", "taken-p/other")
		})
		if err := c.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the policy is gone", func() bool { return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(p), p)) })
		got := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(theirs), got); err != nil {
			t.Fatalf("the other policy's webhook configuration: %v", err)
		}
		if got.ResourceVersion != theirs.ResourceVersion {
			t.Errorf("the other policy's webhook configuration was written: %+v", got)
		}
	})

	t.Run("WebhookOfTheEarlierNamingScheme_DeletedOnceTheNewOneServes", func(t *testing.T) {
		liveLeases(t, c, "renamed", 0)
		createNamespace(t, c, "team-old")
		createNamespace(t, c, "team")
		p := tenantPolicy("team-old", "p", "renamed")
		webhook := func(name, ref string) *admissionregistrationv1.ValidatingWebhookConfiguration {
			ignore := admissionregistrationv1.Ignore
			none := admissionregistrationv1.SideEffectClassNone
			url := "https://127.0.0.1:9443/validate/" + name + "/1"
			return &admissionregistrationv1.ValidatingWebhookConfiguration{
				ObjectMeta: metav1.ObjectMeta{Name: "regent-" + name, Annotations: map[string]string{policyRefAnnotation: ref}},
				Webhooks: []admissionregistrationv1.ValidatingWebhook{{Name: "old.policies.regent.dev",
					ClientConfig:  admissionregistrationv1.WebhookClientConfig{URL: &url, CABundle: testCA},
					FailurePolicy: &ignore, SideEffects: &none, AdmissionReviewVersions: []string{"v1"}}},
			}
		}
		// Written under Kubewarden's name for this policy, and one of another policy.
		ours, theirs := webhook("namespaced-team-old-p", "AdmissionPolicy/team-old/p"), webhook("namespaced-team-old-q", "AdmissionPolicy/team/old-q")
		for _, w := range []*admissionregistrationv1.ValidatingWebhookConfiguration{ours, theirs} {
			if err := c.Create(ctx, w); err != nil {
				t.Fatal(err)
			}
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		validatingWebhook(t, c, serve(t, c, p))
		eventually(t, "the webhook of the earlier name is deleted", func() bool {
			return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(ours), ours))
		})
		if err := c.Get(ctx, client.ObjectKeyFromObject(theirs), theirs); err != nil {
			t.Errorf("another policy's webhook configuration: %v", err)
		}
	})

	t.Run("RevisionOfAnotherOwner_NeitherOverwrittenNorDeleted", func(t *testing.T) {
		liveLeases(t, c, "taken-rev", 0)
		createNamespace(t, c, "revs")
		p := tenantPolicy("revs", "p", "taken-rev")
		ref := referenceTo(namespacedPolicyKind, p)
		other := kubewardenv1.PolicyReference{APIVersion: kubewardenv1.GroupVersion.String(), Kind: kubewardenv1.KindAdmissionPolicy,
			Namespace: "revs-p", Name: "other", UID: "00000000-0000-0000-0000-000000000001"}
		theirs := &kubewardenv1.PolicyRevision{
			ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: ref.RevisionName(1),
				Labels: map[string]string{PolicyLabel: ref.LabelValue(), kubewardenv1.PolicyServerLabel: "taken-rev"}},
			Spec: kubewardenv1.PolicyRevisionSpec{ObjectReference: other, PolicyGeneration: 1, Enabled: true,
				Data: runtime.RawExtension{Raw: []byte(`{"module":"file:///theirs.wasm","rules":[]}`)}},
		}
		if err := c.Create(ctx, theirs); err != nil {
			t.Fatal(err)
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		waitForTenantPolicy(t, c, p, "Failed with a Conflict naming the owner", func(q *kubewardenv1.AdmissionPolicy) bool {
			cond := findCondition(q.Status.Conditions, conditionConflict)
			return q.Status.Phase == kubewardenv1.PhaseFailed && cond != nil && strings.Contains(cond.Message, "belongs to AdmissionPolicy revs-p/other")
		})
		eventually(t, "a Warning event on the policy", func() bool {
			return warnedWith(t, c, "revs", "p", "OwnedByAnotherPolicy", "revs-p/other")
		})
		if err := c.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the policy is gone", func() bool { return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(p), p)) })
		got := &kubewardenv1.PolicyRevision{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(theirs), got); err != nil {
			t.Fatalf("the other policy's revision: %v", err)
		}
		if got.ResourceVersion != theirs.ResourceVersion {
			t.Errorf("the other policy's revision was written: %+v", got)
		}
	})
}
