package admissionpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// hashAnnotation holds a hash of the webhooks the controller wrote: the apiserver defaults fields
// (rule scope, …), so comparing with what it returns would rewrite on every pass.
const hashAnnotation = "regent.dev/webhook-hash"

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
			Labels:      map[string]string{PolicyLabel: ref.ServerPolicyName(), kubewardenv1.PolicyServerLabel: ps},
			Annotations: map[string]string{policyRefAnnotation: policyRef(ref), hashAnnotation: hash}}
	}

	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		Webhooks: []admissionregistrationv1.ValidatingWebhook{parts.validating()}}
	validating.ObjectMeta = meta(hashOf(validating.Webhooks))
	existing := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	switched, err := r.put(ctx, validating, existing, func() int64 {
		if len(existing.Webhooks) == 0 {
			return 0
		}
		return servedGeneration(existing.Webhooks[0].ClientConfig)
	}, generation)
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
	existingM := &admissionregistrationv1.MutatingWebhookConfiguration{}
	_, err = r.put(ctx, mutating, existingM, func() int64 { return 0 }, generation)
	return switched, err
}

// put creates desired or replaces existing when its hash differs; it reports whether the
// generation the configuration serves changed.
func (r *policyReconciler) put(ctx context.Context, desired, existing client.Object, served func() int64, generation int64) (bool, error) {
	err := r.apiReader.Get(ctx, client.ObjectKeyFromObject(desired), existing)
	if apierrors.IsNotFound(err) {
		if err := r.client.Create(ctx, desired); err != nil {
			return false, fmt.Errorf("create %T %s: %w", desired, desired.GetName(), err)
		}
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("read %T %s: %w", desired, desired.GetName(), err)
	}
	if existing.GetAnnotations()[hashAnnotation] == desired.GetAnnotations()[hashAnnotation] {
		return false, nil
	}
	before := served()
	desired.SetResourceVersion(existing.GetResourceVersion())
	if err := r.client.Update(ctx, desired); err != nil {
		return false, fmt.Errorf("update %T %s: %w", desired, desired.GetName(), err)
	}
	return before != generation, nil
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
