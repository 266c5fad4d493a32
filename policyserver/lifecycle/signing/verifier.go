package signing

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"os"
	"time"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// Verifier checks cache files against signer.crt, itself checked against ca.crt, so a replica
// needs no private key and trusts nothing the CA did not issue.
type Verifier struct{ v signature.Verifier }

// NewVerifier checks that the Secret's signer.crt is issued by its ca.crt for code signing and
// valid at now.
func NewVerifier(data map[string][]byte, now time.Time) (*Verifier, error) {
	cas, err := cryptoutils.UnmarshalCertificatesFromPEM(data[CAKey])
	if err != nil || len(cas) == 0 {
		return nil, fmt.Errorf("parse %s: no certificate (%v)", CAKey, err)
	}
	certs, err := cryptoutils.UnmarshalCertificatesFromPEM(data[CertKey])
	if err != nil || len(certs) == 0 {
		return nil, fmt.Errorf("parse %s: no certificate (%v)", CertKey, err)
	}
	roots := x509.NewCertPool()
	for _, c := range cas {
		roots.AddCert(c)
	}
	if _, err := certs[0].Verify(x509.VerifyOptions{
		Roots: roots, CurrentTime: now, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}); err != nil {
		return nil, fmt.Errorf("%s is not issued by %s: %w", CertKey, CAKey, err)
	}
	v, err := signature.LoadVerifier(certs[0].PublicKey, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", CertKey, err)
	}
	return &Verifier{v: v}, nil
}

// Verify checks content against a base64 signature.
func (v *Verifier) Verify(content, sig []byte) error {
	raw, err := base64.StdEncoding.DecodeString(string(bytes.TrimSpace(sig)))
	if err != nil {
		return fmt.Errorf("%w: not base64: %v", ErrBadSignature, err)
	}
	if err := v.v.VerifySignature(bytes.NewReader(raw), bytes.NewReader(content)); err != nil {
		return fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	return nil
}

// ReadVerified reads path and checks it against path.sig; the bytes returned are the ones
// verified, so a file swapped after the check is never used.
func (v *Verifier) ReadVerified(path string) ([]byte, error) {
	content, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	sig, err := os.ReadFile(path + SignatureSuffix)
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %v", path, ErrBadSignature, err)
	}
	if err := v.Verify(content, sig); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return content, nil
}
