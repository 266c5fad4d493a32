package capabilities

import (
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"time"
)

// certificate is Kubewarden's certificate on the wire: an encoding ("Pem" or "Der") and the
// bytes as an array of numbers.
type certificate struct {
	Encoding string `json:"encoding"`
	Data     []int  `json:"data"`
}

func (c certificate) parse() (*x509.Certificate, error) {
	b := make([]byte, len(c.Data))
	for i, v := range c.Data {
		if v < 0 || v > 255 {
			return nil, fmt.Errorf("data[%d] = %d is not a byte", i, v)
		}
		b[i] = byte(v)
	}
	switch c.Encoding {
	case "Pem":
		block, _ := pem.Decode(b)
		if block == nil || block.Type != "CERTIFICATE" {
			return nil, errors.New("data is not a PEM CERTIFICATE block")
		}
		b = block.Bytes
	case "Der":
	default:
		return nil, fmt.Errorf("encoding %q is neither Pem nor Der", c.Encoding)
	}
	return x509.ParseCertificate(b)
}

type certificateVerification struct {
	Cert certificate `json:"cert"`
	// CertChain is intermediates first, the root last; empty trusts the certificate as it is.
	CertChain []certificate `json:"cert_chain"`
	// NotAfter (RFC 3339) is the moment the certificate must still be valid at; empty means it
	// is never considered expired.
	NotAfter string `json:"not_after"`
}

// isCertificateTrusted answers crypto v1/is_certificate_trusted as Kubewarden does:
// {"trusted": bool, "reason": string}. An untrusted certificate is an answer; a request that
// cannot be read is an error. Like Kubewarden (whose use is signing certificates), the chain
// must allow code signing.
func isCertificateTrusted(payload []byte, now time.Time) ([]byte, error) {
	var req certificateVerification
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, fmt.Errorf("crypto v1/is_certificate_trusted: payload is not a certificate verification request: %w", err)
	}
	cert, err := req.Cert.parse()
	if err != nil {
		return nil, fmt.Errorf("crypto v1/is_certificate_trusted: cert: %w", err)
	}
	at := now
	if req.NotAfter != "" {
		t, err := time.Parse(time.RFC3339, req.NotAfter)
		if err != nil {
			return nil, fmt.Errorf("crypto v1/is_certificate_trusted: not_after %q is not an RFC 3339 time", req.NotAfter)
		}
		if cert.NotAfter.Before(t) {
			return verdict(fmt.Sprintf("certificate expires at %s, before not_after %s", cert.NotAfter.UTC().Format(time.RFC3339), req.NotAfter))
		}
		at = t
	} else if now.After(cert.NotAfter) {
		at = cert.NotAfter // never considered expired
	}
	if now.Before(cert.NotBefore) {
		return verdict(fmt.Sprintf("certificate is not valid before %s", cert.NotBefore.UTC().Format(time.RFC3339)))
	}
	if len(req.CertChain) == 0 {
		return verdict("")
	}
	roots, intermediates := x509.NewCertPool(), x509.NewCertPool()
	for i, c := range req.CertChain {
		parsed, err := c.parse()
		if err != nil {
			return nil, fmt.Errorf("crypto v1/is_certificate_trusted: cert_chain[%d]: %w", i, err)
		}
		if i == len(req.CertChain)-1 {
			roots.AddCert(parsed)
		} else {
			intermediates.AddCert(parsed)
		}
	}
	_, err = cert.Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: intermediates, CurrentTime: at,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	})
	if err != nil {
		return verdict("certificate is not trusted by the given chain: " + err.Error())
	}
	return verdict("")
}

// verdict is the answer: trusted when there is no reason not to be.
func verdict(reason string) ([]byte, error) {
	return json.Marshal(struct {
		Trusted bool   `json:"trusted"`
		Reason  string `json:"reason"`
	}{reason == "", reason})
}
