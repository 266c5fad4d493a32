package admissionpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"

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
			Labels: map[string]string{PolicyLabel: ref.ServerPolicyName(), kubewardenv1.PolicyServerLabel: ps},
			Annotations: map[string]string{policyRefAnnotation: policyRef(ref), hashAnnotation: hash,
				generationAnnotation: strconv.FormatInt(generation, 10)}}
	}

	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		Webhooks: []admissionregistrationv1.ValidatingWebhook{parts.validating()}}
	validating.ObjectMeta = meta(hashOf(validating.Webhooks))
	switched, err := r.put(ctx, validating)
	if err != nil {
		return false, err
	}

	if !spec.Mutating {
		err := r.client.Delete(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: name}})
		return switched, client.IgnoreNotFound(err)
	}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		Webhooks: []admissionregistrationv1.MutatingWebhook{parts.mutating()}}
	mutating.ObjectMeta = meta(hashOf(mutating.Webhooks))
	_, err = r.put(ctx, mutating)
	return switched, err
}

// put creates desired or replaces the existing configuration when its hash differs; it reports
// whether the generation it calls changed. The existing one is read from the metadata cache the
// controller's watch keeps, so a reconcile that changes nothing calls no API.
func (r *policyReconciler) put(ctx context.Context, desired client.Object) (bool, error) {
	existing := &metav1.PartialObjectMetadata{}
	gvk, err := apiutil.GVKForObject(desired, r.client.Scheme())
	if err != nil {
		return false, err
	}
	existing.SetGroupVersionKind(gvk)
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
	if existing.Annotations[hashAnnotation] == desired.GetAnnotations()[hashAnnotation] {
		return false, nil
	}
	desired.SetResourceVersion(existing.ResourceVersion)
	if err := r.client.Update(ctx, desired); err != nil {
		return false, fmt.Errorf("update %s %s: %w", gvk.Kind, desired.GetName(), err)
	}
	return existing.Annotations[generationAnnotation] != desired.GetAnnotations()[generationAnnotation], nil
}

// deleteWebhooks removes both of a policy's webhook configurations.
func (r *policyReconciler) deleteWebhooks(ctx context.Context, policyName string) error {
	meta := metav1.ObjectMeta{Name: webhookName(policyName)}
	for _, o := range []client.Object{
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: meta},
		&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: *meta.DeepCopy()},
	} {
		if err := r.client.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete %T %s: %w", o, o.GetName(), err)
		}
	}
	return nil
}

func hashOf(v any) string {
	b, _ := json.Marshal(v) // webhooks always encode
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:8])
}
