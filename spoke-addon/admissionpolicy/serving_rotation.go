package admissionpolicy

import (
	"context"
	"crypto/x509"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/util/cert"
	"open-cluster-management.io/sdk-go/pkg/certrotation"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// Default lifetimes of a policy server's serving CA and certificate. sdk-go's certrotation
// replaces each once 80% of its life has passed (a certificate also as soon as its CA is no
// longer in the bundle), so the defaults rotate the certificate about every 24 days and the CA
// about every 292.
const (
	DefaultServingCAValidity   = 365 * 24 * time.Hour
	DefaultServingCertValidity = 30 * 24 * time.Hour
	// DefaultServingCAPropagation is how long a new CA sits in the bundle before a certificate
	// it signs is served: the webhooks must carry it first, or the apiserver would refuse the
	// new certificate (the policy controllers update them when the bundle changes, and the
	// apiserver reloads them within seconds).
	DefaultServingCAPropagation = time.Minute
)

// caBundleKey is where certrotation keeps the bundle in its ConfigMap.
const caBundleKey = "ca-bundle.crt"

func servingCASecretName(ps string) string { return serverObjectName(ps) + "-serving-ca" }
func caBundleName(ps string) string        { return serverObjectName(ps) + "-ca-bundle" }

// servingHosts are the names the apiserver reaches the policy server's Service by, and extra.
func servingHosts(ps, namespace string, extra []string) []string {
	svc := serverObjectName(ps)
	return append([]string{svc + "." + namespace + ".svc", svc, svc + "." + namespace, svc + "." + namespace + ".svc.cluster.local"}, extra...)
}

// servingRotation keeps a policy server's serving certificate fresh with OCM sdk-go's
// certrotation, as OCM's own components do: a self-signed CA (Secret <server>-serving-ca), a
// CA bundle holding the current CA and every older one not yet expired (ConfigMap
// <server>-ca-bundle), and the serving certificate the pods mount (Secret <server>-tls). The
// webhooks' caBundle is the ConfigMap's bundle, so during a CA rotation the apiserver trusts the
// certificate the replicas still serve and the one that replaces it; the replicas reload the
// mounted files on change (policyserver's certReloader).
type servingRotation struct {
	kube                 kubernetes.Interface
	reader               client.Reader // the apiserver itself: a stale read would issue a second CA
	caValidity, validity time.Duration
	propagation          time.Duration
	extraHosts           []string
}

// rotate issues or renews what is due and returns when to look again: when the first of the CA
// and the certificate reaches its renewal point.
func (s servingRotation) rotate(ctx context.Context, ps *kubewardenv1.PolicyServer, namespace string) (time.Duration, error) {
	owner := metav1.NewControllerRef(ps, kubewardenv1.GroupVersion.WithKind("PolicyServer"))
	secrets := secretLister{ctx: ctx, reader: s.reader}
	ca, err := certrotation.SigningRotation{
		Namespace: namespace, Name: servingCASecretName(ps.Name), SignerNamePrefix: serverObjectName(ps.Name) + "-serving-ca",
		Validity: s.caValidity, Lister: secrets, Client: s.kube.CoreV1(), OwnerReference: owner,
	}.EnsureSigningCertKeyPair()
	if err != nil {
		return 0, fmt.Errorf("serving CA: %w", err)
	}
	bundle, err := certrotation.CABundleRotation{
		Namespace: namespace, Name: caBundleName(ps.Name), Lister: configMapLister{ctx: ctx, reader: s.reader}, Client: s.kube.CoreV1(),
	}.EnsureConfigMapCABundle(ca)
	if err != nil {
		return 0, fmt.Errorf("CA bundle: %w", err)
	}
	if err := s.own(ctx, ps, namespace, owner); err != nil {
		return 0, err
	}
	if wait := s.propagation - time.Since(ca.Config.Certs[0].NotBefore.Add(time.Second)); wait > 0 {
		// A CA this young may not be in every webhook yet: keep serving the current
		// certificate while it is still good, and renew it once the CA has propagated.
		if usable, _ := s.servingUsable(ctx, ps, namespace, bundle); usable {
			return max(wait, time.Second), nil
		}
	}
	if err := (certrotation.TargetRotation{
		Namespace: namespace, Name: servingSecretName(ps.Name), Validity: s.validity,
		HostNames: servingHosts(ps.Name, namespace, s.extraHosts), Lister: secrets, Client: s.kube.CoreV1(), OwnerReference: owner,
	}).EnsureTargetCertKeyPair(ca, bundle); err != nil {
		return 0, fmt.Errorf("serving certificate: %w", err)
	}
	serving, err := s.kube.CoreV1().Secrets(namespace).Get(ctx, servingSecretName(ps.Name), metav1.GetOptions{})
	if err != nil {
		return 0, fmt.Errorf("read serving Secret: %w", err)
	}
	certs, err := cert.ParseCertsPEM(serving.Data[corev1.TLSCertKey])
	if err != nil || len(certs) == 0 {
		return 0, fmt.Errorf("serving Secret %s holds no certificate: %v", serving.Name, err)
	}
	next := min(renewalIn(ca.Config.Certs[0]), renewalIn(certs[0]))
	return max(next, time.Second), nil
}

// servingUsable tells whether the serving Secret holds an unexpired certificate signed by a CA
// of the bundle, i.e. one the webhooks trust.
func (s servingRotation) servingUsable(ctx context.Context, ps *kubewardenv1.PolicyServer, namespace string, bundle []*x509.Certificate) (bool, error) {
	secret, err := s.kube.CoreV1().Secrets(namespace).Get(ctx, servingSecretName(ps.Name), metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	certs, err := cert.ParseCertsPEM(secret.Data[corev1.TLSCertKey])
	if err != nil || len(certs) == 0 || time.Now().After(certs[0].NotAfter) {
		return false, err
	}
	for _, ca := range bundle {
		if certs[0].CheckSignatureFrom(ca) == nil {
			return true, nil
		}
	}
	return false, nil
}

// renewalIn is how long until certrotation renews c: at 80% of its life.
func renewalIn(c *x509.Certificate) time.Duration {
	at := c.NotAfter.Add(-c.NotAfter.Sub(c.NotBefore) / 5)
	return time.Until(at) + time.Second
}

// own makes the CA bundle ConfigMap, which certrotation writes without an owner, the
// PolicyServer's (collected with it) and labels it with its policy server, which is how the
// policy controllers find whose webhooks to update when it changes.
func (s servingRotation) own(ctx context.Context, ps *kubewardenv1.PolicyServer, namespace string, owner *metav1.OwnerReference) error {
	cm := &corev1.ConfigMap{}
	if err := s.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: caBundleName(ps.Name)}, cm); err != nil {
		return fmt.Errorf("read CA bundle: %w", err)
	}
	if metav1.IsControlledBy(cm, ps) && cm.Labels[kubewardenv1.PolicyServerLabel] == ps.Name {
		return nil
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q},"ownerReferences":[{"apiVersion":%q,"kind":%q,"name":%q,"uid":%q,"controller":true,"blockOwnerDeletion":true}]}}`,
		kubewardenv1.PolicyServerLabel, ps.Name, owner.APIVersion, owner.Kind, owner.Name, owner.UID)
	if _, err := s.kube.CoreV1().ConfigMaps(namespace).Patch(ctx, cm.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("own CA bundle: %w", err)
	}
	return nil
}

// secretLister and configMapLister give certrotation the listers it reads through, over a
// controller-runtime reader.
type secretLister struct {
	ctx       context.Context
	reader    client.Reader
	namespace string
}

func (l secretLister) List(sel labels.Selector) ([]*corev1.Secret, error) {
	list := &corev1.SecretList{}
	if err := l.reader.List(l.ctx, list, client.InNamespace(l.namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	out := make([]*corev1.Secret, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (l secretLister) Secrets(namespace string) corev1listers.SecretNamespaceLister {
	l.namespace = namespace
	return l
}

func (l secretLister) Get(name string) (*corev1.Secret, error) {
	s := &corev1.Secret{}
	if err := l.reader.Get(l.ctx, client.ObjectKey{Namespace: l.namespace, Name: name}, s); err != nil {
		return nil, err
	}
	return s, nil
}

type configMapLister struct {
	ctx       context.Context
	reader    client.Reader
	namespace string
}

func (l configMapLister) List(sel labels.Selector) ([]*corev1.ConfigMap, error) {
	list := &corev1.ConfigMapList{}
	if err := l.reader.List(l.ctx, list, client.InNamespace(l.namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	out := make([]*corev1.ConfigMap, len(list.Items))
	for i := range list.Items {
		out[i] = &list.Items[i]
	}
	return out, nil
}

func (l configMapLister) ConfigMaps(namespace string) corev1listers.ConfigMapNamespaceLister {
	l.namespace = namespace
	return l
}

func (l configMapLister) Get(name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	if err := l.reader.Get(l.ctx, client.ObjectKey{Namespace: l.namespace, Name: name}, cm); err != nil {
		return nil, err
	}
	return cm, nil
}
