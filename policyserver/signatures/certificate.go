package signatures

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"fmt"
	"slices"
	"time"

	"github.com/sigstore/sigstore/pkg/signature"
)

// Certificate is the requirement of a policy's SigstoreCertificateVerify request, as Kubewarden
// reads it: a signature made with the key of certPEM, a certificate for code signing. With a
// chain (intermediates first, root last) the certificate must chain to its root now; without
// one it is trusted as given. A signature with a Rekor bundle must have been made while the
// certificate was valid (checked when there is a trust root to check the bundle with); with
// requireBundle, one without a bundle does not count.
func Certificate(certPEM []byte, chainPEM [][]byte, requireBundle bool, annotations map[string]string, now time.Time) (Requirement, error) {
	certs, err := parseCertificates(string(certPEM))
	if err != nil {
		return Requirement{}, fmt.Errorf("certificate: %w", err)
	}
	cert := certs[0]
	if cert.KeyUsage&x509.KeyUsageDigitalSignature == 0 || !slices.Contains(cert.ExtKeyUsage, x509.ExtKeyUsageCodeSigning) {
		return Requirement{}, fmt.Errorf("certificate %q is not for code signing (key usage digitalSignature, extended key usage codeSigning)", cert.Subject.String())
	}
	if len(chainPEM) > 0 {
		roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
		for i, p := range chainPEM {
			c, err := parseCertificates(string(p))
			if err != nil {
				return Requirement{}, fmt.Errorf("certificate_chain[%d]: %w", i, err)
			}
			for _, ca := range c {
				if i == len(chainPEM)-1 {
					roots.AddCert(ca)
				} else {
					intermediates.AddCert(ca)
				}
			}
		}
		if _, err := cert.Verify(x509.VerifyOptions{Roots: roots, Intermediates: intermediates, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}}); err != nil {
			return Requirement{}, fmt.Errorf("certificate %q does not chain to the certificate_chain given: %w", cert.Subject.String(), err)
		}
	}
	v, err := signature.LoadVerifier(cert.PublicKey, crypto.SHA256)
	if err != nil {
		return Requirement{}, fmt.Errorf("certificate %q: %w", cert.Subject.String(), err)
	}
	return Requirement{Kind: KindCertificate, Annotations: annotations, verifier: v, certificate: cert, requireBundle: requireBundle}, nil
}

// checkCertificate checks a signature against a certificate requirement.
func (r *Requirement) checkCertificate(digest string, s Signature, trust *TrustRoot) (int, string) {
	if r.verifier == nil || r.certificate == nil {
		return 0, "not a checkable requirement"
	}
	if err := r.verifier.VerifySignature(bytes.NewReader(s.Signature), bytes.NewReader(s.Payload)); err != nil {
		return 0, r.noSignatureWhy()
	}
	const by = "a signature made with the certificate's key"
	switch {
	case s.Bundle == "" && r.requireBundle:
		return 1, by + " has no Rekor bundle, and one is required"
	case trust == nil && r.requireBundle:
		return 1, fmt.Sprintf("%s: a Rekor bundle is required, and %v", by, ErrNoTrustRoot)
	case s.Bundle != "" && trust != nil:
		at, err := trust.signedAt(s, r.certificate.PublicKey)
		if err != nil {
			return 1, fmt.Sprintf("%s: %v", by, err)
		}
		if at.Before(r.certificate.NotBefore) || at.After(r.certificate.NotAfter) {
			return 2, fmt.Sprintf("%s was made at %s, outside the certificate's validity (%s to %s)", by,
				at.UTC().Format(time.RFC3339), r.certificate.NotBefore.UTC().Format(time.RFC3339), r.certificate.NotAfter.UTC().Format(time.RFC3339))
		}
	}
	if why := payloadMismatch(digest, s.Payload, r.Annotations); why != "" {
		return 3, by + " " + why
	}
	return 0, ""
}
