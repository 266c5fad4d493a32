package admissionpolicy

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/cert"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
)

// secretServer serves, on every handshake, the certificate in the serving Secret, as a replica
// does with the mounted Secret its certReloader watches; it remembers the last one served.
type secretServer struct {
	c          client.Client
	name       string
	mu         sync.Mutex
	lastIssuer []byte
}

func (s *secretServer) getCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	secret := &corev1.Secret{}
	if err := s.c.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: s.name}, secret); err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, err
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	s.mu.Lock()
	s.lastIssuer = leaf.RawIssuer
	s.mu.Unlock()
	return &pair, nil
}

// The serving CA and certificate rotate (short lifetimes here) with sdk-go's certrotation: the
// webhook's caBundle carries the old and the new CA during the overlap, the certificate is
// reissued by the new CA, and the real apiserver keeps calling the webhook successfully.
func TestServingCertificates_RotateWithTheWebhookCABundleFollowing(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	var c client.Client
	secrets := &secretServer{name: servingSecretName("rot")}
	recorder := &pathRecorder{}
	// Certificates left empty: the apiserver dials an IP, sends no SNI, and GetCertificate
	// answers every handshake, as the policy server's certReloader does.
	srv := &http.Server{Handler: recorder, TLSConfig: &tls.Config{GetCertificate: secrets.getCertificate}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.ServeTLS(ln, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	url := "https://" + ln.Addr().String()
	c = startController(t, hub.Config, func(o *Options) {
		o.WebhookURL = func(string) string { return url }
		o.CABundle = nil // the serving CA bundle
		o.ServingCAValidity, o.ServingCertValidity, o.ServingCAPropagation = 50*time.Second, 50*time.Second, 3*time.Second
		o.ServingHosts = []string{"127.0.0.1"}
	})
	secrets.c = c
	ctx := context.Background()
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "rot"}, Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 1}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	liveLeases(t, c, "rot", 0)
	p := clusterPolicy("rot", "rot")
	fail := admissionregistrationv1.Fail
	p.Spec.FailurePolicy = &fail
	p.Spec.Rules[0].Resources = []string{"configmaps"}
	p.Spec.ObjectSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"regent-test": "rot"}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	report(t, c, "clusterwide-rot-g1", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)

	n := 0
	call := func() error {
		n++
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("rot-%d", n),
			Labels: map[string]string{"regent-test": "rot"}}}
		return c.Create(ctx, cm)
	}
	eventually(t, "the apiserver calls the webhook", func() bool {
		err := call()
		if err != nil && !strings.Contains(err.Error(), "failed calling webhook") {
			t.Fatal(err)
		}
		return err == nil && recorder.last() == "/validate/clusterwide-rot/1"
	})

	caSecret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: servingCASecretName("rot")}, caSecret); err != nil {
		t.Fatal(err)
	}
	first := caSecret.Data[corev1.TLSCertKey]
	webhookBundle := func() []*x509.Certificate {
		w := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: webhookName("clusterwide-rot")}, w); err != nil {
			return nil
		}
		certs, _ := cert.ParseCertsPEM(w.Webhooks[0].ClientConfig.CABundle)
		return certs
	}
	var second []byte
	eventually(t, "a new CA beside the old one in the webhook's caBundle", func() bool {
		if c.Get(ctx, client.ObjectKeyFromObject(caSecret), caSecret) != nil || bytes.Equal(caSecret.Data[corev1.TLSCertKey], first) {
			return false
		}
		second = caSecret.Data[corev1.TLSCertKey]
		bundle := webhookBundle()
		return len(bundle) == 2 && containsPEM(bundle, first) && containsPEM(bundle, second)
	})
	newCA, err := cert.ParseCertsPEM(second)
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the apiserver calls the webhook served with a certificate of the new CA", func() bool {
		err := call()
		secrets.mu.Lock()
		issuer := secrets.lastIssuer
		secrets.mu.Unlock()
		if err != nil {
			t.Logf("call during the rotation: %v", err)
			return false
		}
		return bytes.Equal(issuer, newCA[0].RawSubject)
	})
}

func containsPEM(certs []*x509.Certificate, p []byte) bool {
	parsed, err := cert.ParseCertsPEM(p)
	if err != nil || len(parsed) == 0 {
		return false
	}
	for _, c := range certs {
		if bytes.Equal(c.Raw, parsed[0].Raw) {
			return true
		}
	}
	return false
}
