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

// VerificationConfigAnnotation and SigstoreTrustConfigAnnotation on the policy server pods name
// the content of the verificationConfig and sigstoreTrustConfig they started with: the server
// reads them once, at start, so an edit rolls the pods, and what they trust is always what the
// ConfigMaps say.
const (
	VerificationConfigAnnotation  = "regent.dev/verification-config"
	SigstoreTrustConfigAnnotation = "regent.dev/sigstore-trust-config"
)

// signatureInputs are the versions of the ConfigMaps the pods verify signatures with, by the
// annotation that names them.
type signatureInputs map[string]string

// verificationVersion reads the version of the PolicyServer's verificationConfig and
// sigstoreTrustConfig (configMapVersion).
func (r *policyServerReconciler) verificationVersion(ctx context.Context, ps *kubewardenv1.PolicyServer) (signatureInputs, error) {
	verification, err := r.configMapVersion(ctx, "verificationConfig", ps.Spec.VerificationConfig, signatures.ConfigMapKey)
	if err != nil {
		return nil, err
	}
	trust, err := r.configMapVersion(ctx, "sigstoreTrustConfig", ps.Spec.SigstoreTrustConfig, signatures.TrustConfigMapKey)
	if err != nil {
		return nil, err
	}
	return signatureInputs{VerificationConfigAnnotation: verification, SigstoreTrustConfigAnnotation: trust}, nil
}

// configMapVersion is a digest of key of the ConfigMap named by a PolicyServer's field, "" when
// the field is empty, and "missing" while the ConfigMap or its key does not exist (the pods then
// trust no module, or no keyless signature, and roll again once it appears).
func (r *policyServerReconciler) configMapVersion(ctx context.Context, field, name, key string) (string, error) {
	if name == "" {
		return "", nil
	}
	var cm corev1.ConfigMap
	err := r.nsReader.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: name}, &cm)
	if apierrors.IsNotFound(err) {
		return "missing", nil
	}
	if err != nil {
		return "", fmt.Errorf("read %s ConfigMap %s: %w", field, name, err)
	}
	data, ok := cm.Data[key]
	if !ok {
		return "missing", nil
	}
	sum := sha256.Sum256([]byte(data))
	return "sha256:" + hex.EncodeToString(sum[:8]), nil
}

func setVerificationVersion(pod *corev1.PodTemplateSpec, versions signatureInputs) {
	for annotation, version := range versions {
		if version == "" {
			continue
		}
		if pod.Annotations == nil {
			pod.Annotations = map[string]string{}
		}
		pod.Annotations[annotation] = version
	}
}

// onVerificationConfig maps a ConfigMap of the policy servers' namespace to the PolicyServers
// whose verificationConfig or sigstoreTrustConfig names it.
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
		if ps.Spec.VerificationConfig == o.GetName() || ps.Spec.SigstoreTrustConfig == o.GetName() {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: ps.Name}})
		}
	}
	return out
}
