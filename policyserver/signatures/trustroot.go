package signatures

import (
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	prototrustroot "github.com/sigstore/protobuf-specs/gen/pb-go/trustroot/v1"
	"github.com/sigstore/sigstore-go/pkg/root"
	"google.golang.org/protobuf/encoding/protojson"
)

// TrustConfigMapKey is the key of a PolicyServer's sigstoreTrustConfig ConfigMap that holds the
// Sigstore trust configuration, as in Kubewarden.
const TrustConfigMapKey = "sigstore-trust-config"

// ErrNoTrustRoot: a keyless requirement, and no Sigstore trust root to check it against.
var ErrNoTrustRoot = errors.New("keyless signatures (genericIssuer, githubAction) are checked against a Sigstore trust root, and this policy server has none: " +
	"set the PolicyServer's sigstoreTrustConfig to a ConfigMap holding your Sigstore instance's ClientTrustConfig (Regent does not fetch the public-good Sigstore root over the internet)")

// TrustRoot is what keyless signatures are checked against: the Fulcio certificate authorities
// that issue signing certificates and the Rekor logs whose signed entry timestamps say when a
// signature was made, each with the period it was trusted for.
type TrustRoot struct {
	root        *root.TrustedRoot
	fingerprint string
}

// LoadTrustRoot reads a trust configuration file (a mounted sigstoreTrustConfig ConfigMap's key).
func LoadTrustRoot(path string) (*TrustRoot, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("sigstore trust config: %w", err)
	}
	t, err := ParseTrustRoot(b)
	if err != nil {
		return nil, fmt.Errorf("sigstore trust config %s: %w", path, err)
	}
	return t, nil
}

// ParseTrustRoot reads Sigstore's ClientTrustConfig JSON (what Kubewarden's sigstoreTrustConfig
// holds: {"mediaType": …, "trustedRoot": …, "signingConfig": …}) or a bare trusted_root.json.
// Only the trusted root matters here: verifying signs nothing. Fields a newer Sigstore adds are
// ignored, but a root without a Fulcio CA or a Rekor log is an error, since it could trust no
// keyless signature.
func ParseTrustRoot(b []byte) (*TrustRoot, error) {
	lenient := protojson.UnmarshalOptions{DiscardUnknown: true}
	var client prototrustroot.ClientTrustConfig
	if err := lenient.Unmarshal(b, &client); err != nil {
		return nil, fmt.Errorf("neither a ClientTrustConfig nor a trusted root: %w", err)
	}
	pb := client.GetTrustedRoot()
	if pb == nil {
		pb = &prototrustroot.TrustedRoot{}
		if err := lenient.Unmarshal(b, pb); err != nil {
			return nil, fmt.Errorf("neither a ClientTrustConfig nor a trusted root: %w", err)
		}
	}
	tr, err := root.NewTrustedRootFromProtobuf(pb)
	if err != nil {
		return nil, fmt.Errorf("trusted root: %w", err)
	}
	if len(tr.FulcioCertificateAuthorities()) == 0 {
		return nil, errors.New("trusted root lists no Fulcio certificate authority (certificateAuthorities): no keyless certificate could be trusted")
	}
	if len(tr.RekorLogs()) == 0 {
		return nil, errors.New("trusted root lists no Rekor log (tlogs): when a keyless signature was made could not be checked")
	}
	sum := sha256.Sum256(b)
	return &TrustRoot{root: tr, fingerprint: hex.EncodeToString(sum[:8])}, nil
}

// chainsAt checks that leaf was issued, through the trusted intermediates and any of
// intermediates (which are only candidates: the chain must end at a trusted root), by a Fulcio
// CA trusted at the signing time at, with every certificate of the chain valid then.
func (t *TrustRoot) chainsAt(leaf *x509.Certificate, intermediates []*x509.Certificate, at time.Time) error {
	var last error
	for _, ca := range t.root.FulcioCertificateAuthorities() {
		if fca, ok := ca.(*root.FulcioCertificateAuthority); ok && len(intermediates) > 0 {
			with := *fca
			with.Intermediates = append(append([]*x509.Certificate{}, fca.Intermediates...), intermediates...)
			ca = &with
		}
		if _, err := ca.Verify(leaf, at); err != nil {
			last = err
			continue
		}
		return nil
	}
	return fmt.Errorf("its certificate (issued by %q) does not chain to a Fulcio CA of the trust root trusted at %s: %v", leaf.Issuer.String(), at.UTC().Format(time.RFC3339), last)
}

// rekorLog is the trust root's Rekor log of id (hex), with the period its key was trusted.
func (t *TrustRoot) rekorLog(id string) (*root.TransparencyLog, bool) {
	l, ok := t.root.RekorLogs()[id]
	return l, ok
}
