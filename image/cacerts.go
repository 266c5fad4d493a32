package image

import (
	"bytes"
	"encoding/pem"

	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// caBundle is Mozilla's NSS root store from the pinned x509roots/fallback module, PEM-encoded as
// Go's crypto/x509 looks for it on Linux (/etc/ssl/certs/ca-certificates.crt). Roots NSS trusts
// only for certificates issued before a distrust date are left out: a PEM bundle cannot carry that
// constraint, and including them would trust what NSS no longer does.
func caBundle() []byte {
	var buf bytes.Buffer
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		_ = pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate})
	}
	return buf.Bytes()
}
