package fleet

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// clientCA is the hub apiserver's client-certificate authority when OCM's agents run: envtest's
// own keeps its key in memory, but kube-controller-manager must sign the CSRs OCM's agents send
// with the very CA the apiserver trusts, so this one writes its key beside the certificate. It
// also issues the conversion webhook's serving certificate (another instance, another CA).
type clientCA struct {
	cert    *x509.Certificate
	certPEM []byte
	key     *ecdsa.PrivateKey
	keyPEM  []byte
	dir     string
}

var _ envtest.Authn = (*clientCA)(nil)

func newClientCA() (*clientCA, error) {
	key, cert, certPEM, err := newCA("regent-fleet-client-ca")
	if err != nil {
		return nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return &clientCA{
		cert:    cert,
		certPEM: certPEM,
		key:     key,
		keyPEM:  pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
	}, nil
}

func (ca *clientCA) certFile() string { return filepath.Join(ca.dir, "client-ca.crt") }
func (ca *clientCA) keyFile() string  { return filepath.Join(ca.dir, "client-ca.key") }

// Configure points the apiserver at the CA certificate.
func (ca *clientCA) Configure(workDir string, args *envtest.Arguments) error {
	ca.dir = workDir
	args.Set("client-ca-file", ca.certFile())
	return nil
}

// Start writes the certificate and key where the apiserver and kube-controller-manager read them.
func (ca *clientCA) Start() error {
	if err := os.WriteFile(ca.certFile(), ca.certPEM, 0o644); err != nil {
		return err
	}
	return os.WriteFile(ca.keyFile(), ca.keyPEM, 0o600)
}

// AddUser issues a client certificate for user.
func (ca *clientCA) AddUser(user envtest.User, base *rest.Config) (*rest.Config, error) {
	certPEM, keyPEM, err := ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: user.Name, Organization: user.Groups},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
	if err != nil {
		return nil, fmt.Errorf("client certificate for %s: %w", user.Name, err)
	}
	cfg := rest.CopyConfig(base)
	cfg.CertData, cfg.KeyData = certPEM, keyPEM
	return cfg, nil
}

// issue signs a certificate for a new key, valid for a year from tmpl's subject, usages and SANs.
func (ca *clientCA) issue(tmpl *x509.Certificate) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl.SerialNumber = big.NewInt(now.UnixNano())
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Hour), now.Add(365*24*time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

// writeServingCert writes tls.crt and tls.key for 127.0.0.1 into dir, from a CA of their own,
// and returns that CA's certificate for the caller to trust.
func writeServingCert(dir string) ([]byte, error) {
	ca, err := newClientCA()
	if err != nil {
		return nil, err
	}
	certPEM, keyPEM, err := ca.issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), certPEM, 0o644); err != nil {
		return nil, err
	}
	return ca.certPEM, os.WriteFile(filepath.Join(dir, "tls.key"), keyPEM, 0o600)
}

// Stop has nothing to end: the files go with the fleet's folder.
func (ca *clientCA) Stop() error { return nil }
