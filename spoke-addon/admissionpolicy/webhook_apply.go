package admissionpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// hashAnnotation holds a hash of the webhooks the controller wrote: the apiserver defaults fields
// (rule scope, …), so comparing with what it returns would rewrite on every pass.
const hashAnnotation = "regent.dev/webhook-hash"

// generationAnnotation on a webhook configuration is the generation it calls, so a switch is
// seen from metadata alone.
const generationAnnotation = "regent.dev/serving-generation"

// applyWebhooks points the policy's webhook configurations at generation, built from the spec
// in that generation's revision (not the policy's newest spec: rules of an unready generation must
// not reach the apiserver). It reports whether the served generation changed.
func (r *policyReconciler) applyWebhooks(ctx context.Context, obj client.Object, ref kubewardenv1.PolicyReference,
	generation int64, revs []kubewardenv1.PolicyRevision) (bool, error) {
	spec := specOf(obj)
	for i := range revs {
		if revs[i].Spec.PolicyGeneration == generation {
			spec = &kubewardenv1.PolicySpec{}
			if err := json.Unmarshal(revs[i].Spec.Data.Raw, spec); err != nil {
				return false, fmt.Errorf("decode revision %s: %w", revs[i].Name, err)
			}
		}
	}
	ps := policyServerOf(obj)
	target := webhookTarget{Namespace: r.namespace, Service: serverObjectName(ps)}
	if r.opts.WebhookURL != nil {
		target.BaseURL = r.opts.WebhookURL(ps)
	}
	ca, err := r.opts.CABundle(ctx, ps)
	if err != nil {
		return false, fmt.Errorf("CA bundle of policy server %s: %w", ps, err)
	}
	target.CABundle = ca
	parts := webhookFor(ref, *spec, generation, target)
	name := webhookName(ref.ServerPolicyName())
	meta := func(hash string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name,
			Labels: map[string]string{PolicyLabel: ref.LabelValue(), kubewardenv1.PolicyServerLabel: ps},
			Annotations: map[string]string{policyRefAnnotation: policyRef(ref), policyUIDAnnotation: ref.UID,
				hashAnnotation: hash, generationAnnotation: strconv.FormatInt(generation, 10)}}
	}

	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		Webhooks: []admissionregistrationv1.ValidatingWebhook{parts.validating()}}
	validating.ObjectMeta = meta(hashOf(validating.Webhooks))
	switched, err := r.put(ctx, ref, validating)
	if err != nil {
		return false, err
	}
	if switched {
		if err := r.deleteRenamed(ctx, ref, name); err != nil {
			return false, err
		}
	}

	if !spec.Mutating {
		_, err := r.deleteOwned(ctx, ref, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}})
		return switched, err
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		Webhooks: []admissionregistrationv1.MutatingWebhook{parts.mutating()}}
	mutating.ObjectMeta = meta(hashOf(mutating.Webhooks))
	_, err = r.put(ctx, ref, mutating)
	return switched, err
}

// put creates desired or replaces the existing configuration when its hash differs; it reports
// whether the generation it calls changed. The existing one is read from the metadata cache the
// controller's watch keeps, so a reconcile that changes nothing calls no API. An existing one
// another policy wrote is left alone (an *ownershipConflict); the update carries the
// resourceVersion of the copy whose owner was checked, so a change of hands in between conflicts.
func (r *policyReconciler) put(ctx context.Context, ref kubewardenv1.PolicyReference, desired client.Object) (bool, error) {
	existing, err := r.webhookMetadata(desired)
	if err != nil {
		return false, err
	}
	gvk := existing.GroupVersionKind()
	err = r.reader.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if apierrors.IsNotFound(err) {
		if err := r.client.Create(ctx, desired); err != nil {
			return false, fmt.Errorf("create %s %s: %w", gvk.Kind, desired.GetName(), err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %s %s: %w", gvk.Kind, desired.GetName(), err)
	}
	if conflict := webhookOwner(existing, gvk.Kind, ref); conflict != nil {
		return false, conflict
	}
	if existing.Annotations[hashAnnotation] == desired.GetAnnotations()[hashAnnotation] {
		return false, nil
	}
	desired.SetResourceVersion(existing.ResourceVersion)
	if err := r.client.Update(ctx, desired); err != nil {
		return false, fmt.Errorf("update %s %s: %w", gvk.Kind, desired.GetName(), err)
	}
	return existing.Annotations[generationAnnotation] != desired.GetAnnotations()[generationAnnotation], nil
}

// webhookMetadata is an empty metadata object of desired's kind.
func (r *policyReconciler) webhookMetadata(desired client.Object) (*metav1.PartialObjectMetadata, error) {
	gvk, err := apiutil.GVKForObject(desired, r.client.Scheme())
	if err != nil {
		return nil, err
	}
	existing := &metav1.PartialObjectMetadata{}
	existing.SetGroupVersionKind(gvk)
	return existing, nil
}

// deleteOwned deletes the webhook configuration named like o if ref's policy wrote it; one
// another policy wrote is left alone and returned. The delete is conditioned on the UID of the
// copy whose owner was checked, so an object recreated in between is not deleted (the delete
// fails and the next reconcile looks again).
func (r *policyReconciler) deleteOwned(ctx context.Context, ref kubewardenv1.PolicyReference, o client.Object) (*ownershipConflict, error) {
	existing, err := r.webhookMetadata(o)
	if err != nil {
		return nil, err
	}
	kind := existing.GroupVersionKind().Kind
	if err := r.reader.Get(ctx, client.ObjectKeyFromObject(o), existing); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("read %s %s: %w", kind, o.GetName(), err)
	}
	if conflict := webhookOwner(existing, kind, ref); conflict != nil {
		return conflict, nil
	}
	uid := existing.GetUID()
	if err := r.client.Delete(ctx, o, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return nil, fmt.Errorf("delete %s %s: %w", kind, o.GetName(), err)
	}
	return nil, nil
}

// deleteWebhooks removes both of a policy's webhook configurations, and returns those it left
// because another policy wrote them.
func (r *policyReconciler) deleteWebhooks(ctx context.Context, ref kubewardenv1.PolicyReference) ([]*ownershipConflict, error) {
	meta := metav1.ObjectMeta{Name: webhookName(ref.ServerPolicyName())}
	var left []*ownershipConflict
	for _, o := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: meta},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: *meta.DeepCopy()},
	} {
		conflict, err := r.deleteOwned(ctx, ref, o)
		if err != nil {
			return nil, err
		}
		if conflict != nil {
			left = append(left, conflict)
		}
	}
	return left, nil
}

func hashOf(v any) string {
	b, _ := json.Marshal(v) // webhooks always encode
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}

// deleteRenamed deletes the policy's webhook configurations of another name than name: those a
// version of Regent with an earlier naming scheme wrote (Kubewarden's ambiguous names), which
// call a path the policy server no longer serves and would fail every request they match. They
// are found by the policy reference they carry; it runs when the webhook switches generation,
// which covers the first write after an upgrade without listing on every reconcile.
func (r *policyReconciler) deleteRenamed(ctx context.Context, ref kubewardenv1.PolicyReference, name string) error {
	for _, kind := range []string{"ValidatingWebhookConfigurationList", "MutatingWebhookConfigurationList"} {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind(kind))
		if err := r.reader.List(ctx, list); err != nil {
			return fmt.Errorf("list %s: %w", kind, err)
		}
		for i := range list.Items {
			o := &list.Items[i]
			if o.Name == name || o.Annotations[policyRefAnnotation] != policyRef(ref) {
				continue
			}
			o.SetGroupVersionKind(admissionregistrationv1.SchemeGroupVersion.WithKind(strings.TrimSuffix(kind, "List")))
			uid := o.UID
			if err := r.client.Delete(ctx, o, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("delete renamed %s %s: %w", o.Kind, o.Name, err)
			}
		}
	}
	return nil
}

// conditionWebhook on a policy says the apiserver refused the webhook configuration of its
// newest generation.
const conditionWebhook = "WebhookConfigured"

// webhookRefused is the condition for a refused webhook configuration: the generation is not
// served, the previous one keeps its webhook.
func webhookRefused(serving, generation int64, err error) metav1.Condition {
	return metav1.Condition{
		Type: conditionWebhook, Status: metav1.ConditionFalse, Reason: "WebhookRefused", ObservedGeneration: generation,
		Message: fmt.Sprintf("the apiserver refused the webhook configuration of generation %d: %v", serving, err),
	}
}
