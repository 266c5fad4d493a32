package signing

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"fmt"
	"math/big"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
)

// Keys of the signing Secret's data.
const (
	CAKey     = "ca.crt"
	CertKey   = "signer.crt"
	SignerKey = "signer.key"
	// TransferTokenKey is a random secret every replica reads with the certificates: a
	// replica proves with it that it may fetch signed cache entries from the leader
	// (NewTransferToken).
	TransferTokenKey = "transfer.token"
)

// NewTransferToken is a fresh value for TransferTokenKey.
func NewTransferToken() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return []byte(hex.EncodeToString(b))
}

// SecretName is the Secret holding what every replica verifies with: the signing CA's and the
// signer's certificates (ca.crt, signer.crt), no key; and the transfer token (transfer.token).
func SecretName(policyServer string) string {
	return "regent-policy-server-" + policyServer + "-signing"
}

// KeySecretName is the Secret holding the signer's private key (signer.key). Only the policy
// server's leader identity may read it; replicas never need it.
func KeySecretName(policyServer string) string { return SecretName(policyServer) + "-key" }

// SplitSecretData parts NewSecretData's data into the public Secret's and the key Secret's.
func SplitSecretData(data map[string][]byte) (public, key map[string][]byte) {
	return map[string][]byte{CAKey: data[CAKey], CertKey: data[CertKey], TransferTokenKey: data[TransferTokenKey]},
		map[string][]byte{SignerKey: data[SignerKey]}
}

// NewSecretData makes a CA and a signing certificate and key issued by it, valid for validity
// from now, in the Secrets' layout (PEM, ECDSA P-256), both Secrets' data together
// (SplitSecretData parts them). The controller issues its own; tests use this.
func NewSecretData(policyServer string, now time.Time, validity time.Duration) (map[string][]byte, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate CA key: %w", err)
	}
	caTmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "regent-policy-server-" + policyServer + "-ca"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create CA certificate: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("generate signing key: %w", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "regent-policy-server-" + policyServer + "-signer"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validity),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, fmt.Errorf("create signing certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	caPEM, err := cryptoutils.MarshalCertificateToPEM(ca)
	if err != nil {
		return nil, err
	}
	certPEM, err := cryptoutils.MarshalCertificateToPEM(cert)
	if err != nil {
		return nil, err
	}
	keyPEM, err := cryptoutils.MarshalPrivateKeyToPEM(key)
	if err != nil {
		return nil, err
	}
	return map[string][]byte{CAKey: caPEM, CertKey: certPEM, SignerKey: keyPEM, TransferTokenKey: NewTransferToken()}, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}
