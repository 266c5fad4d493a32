package admissionpolicy

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"math/big"
	"time"
)

// Keys of the Secrets the controller issues.
const (
	caCertKey     = "ca.crt"
	caKeyKey      = "ca.key"
	signerCertKey = "signer.crt"
	signerKeyKey  = "signer.key"
	// transferTokenKey, in the Secret of certificates every replica reads, is what a replica
	// proves to its leader that it may fetch signed cache entries with (policyserver/lifecycle).
	transferTokenKey = "transfer.token"
)

// newTransferToken is a fresh random transfer token.
func newTransferToken() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails (crypto/rand since Go 1.24)
	return []byte(hex.EncodeToString(b))
}

// certValidity is the life of the internal CA and the cache signer it issues. Only those use
// it: the serving certificate has a CA of its own, rotated by sdk-go's certrotation
// (serving_rotation.go). Rotating the signer is the cache signing scheme's concern: replicas
// verify cache entries against this CA.
const certValidity = 10 * 365 * 24 * time.Hour

// keyPair is a certificate and its key, PEM encoded.
type keyPair struct {
	cert, key []byte
	parsed    *x509.Certificate
	signer    *ecdsa.PrivateKey
}

// newCA issues the self-signed CA of one policy server: it issues the signer, which signs cache
// files, and the serving certificate.
func newCA(ps string, now time.Time) (keyPair, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: "regent-policy-server-" + ps + " CA"},
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	return issue(tmpl, nil, now)
}

// newSigner issues the key the leader signs cache files with; replicas verify against the CA.
func newSigner(ps string, ca keyPair, now time.Time) (keyPair, error) {
	return issue(&x509.Certificate{
		Subject:     pkix.Name{CommonName: "regent-policy-server-" + ps + " cache signer"},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}, &ca, now)
}

// issue signs tmpl with a new ECDSA P-256 key, by parent or by itself when parent is nil.
func issue(tmpl *x509.Certificate, parent *keyPair, now time.Time) (keyPair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return keyPair{}, fmt.Errorf("generate key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return keyPair{}, fmt.Errorf("serial: %w", err)
	}
	tmpl.SerialNumber = serial
	tmpl.NotBefore = now.Add(-time.Hour) // tolerate clocks a little behind ours
	tmpl.NotAfter = now.Add(certValidity)
	issuer, signer := tmpl, key
	if parent != nil {
		issuer, signer = parent.parsed, parent.signer
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, issuer, &key.PublicKey, signer)
	if err != nil {
		return keyPair{}, fmt.Errorf("sign certificate %s: %w", tmpl.Subject.CommonName, err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return keyPair{}, fmt.Errorf("encode key: %w", err)
	}
	parsed, err := x509.ParseCertificate(der)
	if err != nil {
		return keyPair{}, err
	}
	return keyPair{
		cert:   pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		key:    pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}),
		parsed: parsed, signer: key,
	}, nil
}

// parseKeyPair reads a pair written by issue.
func parseKeyPair(certPEM, keyPEM []byte) (keyPair, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return keyPair{}, fmt.Errorf("not PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("parse certificate: %w", err)
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return keyPair{}, fmt.Errorf("parse key: %w", err)
	}
	return keyPair{cert: certPEM, key: keyPEM, parsed: cert, signer: key}, nil
}
