package admissionpolicy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver/signatures"
)

// VerificationConfigAnnotation on the policy server pods names the content of the
// verificationConfig they started with: the server reads it once, at start, so an edit rolls
// the pods, and what they trust is always what the ConfigMap says.
const VerificationConfigAnnotation = "regent.dev/verification-config"

// verificationVersion is a digest of the PolicyServer's verificationConfig ConfigMap key, "" when
// it has none, and "missing" while the ConfigMap or its key does not exist (the pods then trust
// no module, and roll again once it appears).
func (r *policyServerReconciler) verificationVersion(ctx context.Context, ps *kubewardenv1.PolicyServer) (string, error) {
	if ps.Spec.VerificationConfig == "" {
		return "", nil
	}
	var cm corev1.ConfigMap
	err := r.nsReader.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: ps.Spec.VerificationConfig}, &cm)
	if apierrors.IsNotFound(err) {
		return "missing", nil
	}
	if err != nil {
		return "", fmt.Errorf("read verificationConfig ConfigMap %s: %w", ps.Spec.VerificationConfig, err)
	}
	data, ok := cm.Data[signatures.ConfigMapKey]
	if !ok {
		return "missing", nil
	}
	sum := sha256.Sum256([]byte(data))
	return "sha256:" + hex.EncodeToString(sum[:8]), nil
}

func setVerificationVersion(pod *corev1.PodTemplateSpec, version string) {
	if version == "" {
		return
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[VerificationConfigAnnotation] = version
}

// onVerificationConfig maps a ConfigMap of the policy servers' namespace to the PolicyServers
// whose verificationConfig names it.
func (r *policyServerReconciler) onVerificationConfig(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetNamespace() != r.namespace {
		return nil
	}
	var list kubewardenv1.PolicyServerList
	if err := r.reader.List(ctx, &list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, ps := range list.Items {
		if ps.Spec.VerificationConfig == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: ps.Name}})
		}
	}
	return out
}
