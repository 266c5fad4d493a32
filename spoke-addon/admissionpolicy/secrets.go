package admissionpolicy

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// applySecrets keeps a policy server's internal CA (never mounted) and the signing Secrets its
// leader signs cache files with (ca.crt and signer.crt for every replica, signer.key apart for
// the leader identity alone — the contract with the policy server). Each is created once; a lost
// CA reissues the signer, which would no longer verify. The serving certificate has a CA of its
// own and rotates (servingRotation).
func (r *policyServerReconciler) applySecrets(ctx context.Context, ps *kubewardenv1.PolicyServer) error {
	now := r.clock.Now()
	caSecret := &corev1.Secret{}
	var ca keyPair
	fresh := false
	err := r.nsReader.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: caSecretName(ps.Name)}, caSecret)
	switch {
	case apierrors.IsNotFound(err):
		if ca, err = newCA(ps.Name, now); err != nil {
			return fmt.Errorf("issue CA: %w", err)
		}
		if err := r.createSecret(ctx, ps, caSecretName(ps.Name), corev1.SecretTypeOpaque,
			map[string][]byte{caCertKey: ca.cert, caKeyKey: ca.key}, false); err != nil {
			return err
		}
		fresh = true
	case err != nil:
		return fmt.Errorf("read CA Secret: %w", err)
	default:
		if ca, err = parseKeyPair(caSecret.Data[caCertKey], caSecret.Data[caKeyKey]); err != nil {
			return fmt.Errorf("CA Secret %s: %w", caSecretName(ps.Name), err)
		}
	}

	// The certificates every replica verifies with and the key only the leader identity reads
	// are two Secrets, issued together: one without the other is reissued whole.
	if fresh || r.missing(ctx, signingSecretName(ps.Name)) || r.missing(ctx, signingKeySecretName(ps.Name)) {
		signer, err := newSigner(ps.Name, ca, now)
		if err != nil {
			return fmt.Errorf("issue signer: %w", err)
		}
		if err := r.createSecret(ctx, ps, signingKeySecretName(ps.Name), corev1.SecretTypeOpaque,
			map[string][]byte{signerKeyKey: signer.key}, true); err != nil {
			return err
		}
		if err := r.createSecret(ctx, ps, signingSecretName(ps.Name), corev1.SecretTypeOpaque,
			map[string][]byte{caCertKey: ca.cert, signerCertKey: signer.cert, transferTokenKey: newTransferToken()}, true); err != nil {
			return err
		}
		return nil
	}
	return r.ensureTransferToken(ctx, ps)
}

// ensureTransferToken adds the transfer token to a signing Secret issued before replicas
// fetched cache entries from their leader.
func (r *policyServerReconciler) ensureTransferToken(ctx context.Context, ps *kubewardenv1.PolicyServer) error {
	s := &corev1.Secret{}
	if err := r.nsReader.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: signingSecretName(ps.Name)}, s); err != nil {
		return fmt.Errorf("read signing Secret: %w", err)
	}
	if len(s.Data[transferTokenKey]) > 0 {
		return nil
	}
	s = s.DeepCopy()
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[transferTokenKey] = newTransferToken()
	if err := r.client.Update(ctx, s); err != nil {
		return fmt.Errorf("add the transfer token to Secret %s: %w", s.Name, err)
	}
	return nil
}

func (r *policyServerReconciler) missing(ctx context.Context, name string) bool {
	err := r.nsReader.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: name}, &corev1.Secret{})
	return apierrors.IsNotFound(err)
}

// createSecret creates a Secret owned by ps; replace overwrites one issued by a lost CA.
func (r *policyServerReconciler) createSecret(ctx context.Context, ps *kubewardenv1.PolicyServer, name string,
	typ corev1.SecretType, data map[string][]byte, replace bool) error {
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: r.namespace,
			Labels: map[string]string{kubewardenv1.PolicyServerLabel: ps.Name}},
		Type: typ, Data: data,
	}
	if err := controllerutil.SetControllerReference(ps, s, r.client.Scheme()); err != nil {
		return err
	}
	err := r.client.Create(ctx, s)
	if apierrors.IsAlreadyExists(err) && replace {
		err = r.client.Update(ctx, s)
	}
	if err != nil {
		return fmt.Errorf("write Secret %s: %w", name, err)
	}
	r.recorder.Eventf(ps, nil, corev1.EventTypeNormal, "SecretIssued", "Issue", "Secret %s/%s issued", r.namespace, name)
	return nil
}

// servingCA is the bundle of CAs the policy server's serving certificates chain to — the
// current one and any older one not yet expired: the webhooks' caBundle.
func servingCA(ctx context.Context, reader client.Reader, namespace, ps string) ([]byte, error) {
	cm := &corev1.ConfigMap{}
	if err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: caBundleName(ps)}, cm); err != nil {
		return nil, fmt.Errorf("CA bundle %s/%s (is PolicyServer %s created?): %w", namespace, caBundleName(ps), ps, err)
	}
	if len(cm.Data[caBundleKey]) == 0 {
		return nil, fmt.Errorf("CA bundle %s/%s has no %s", namespace, caBundleName(ps), caBundleKey)
	}
	return []byte(cm.Data[caBundleKey]), nil
}
