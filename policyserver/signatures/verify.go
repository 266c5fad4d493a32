package signatures

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

// ErrUntrusted: the artifact's signatures do not meet the configuration.
var ErrUntrusted = errors.New("module signature not trusted")

// Verify fetches the signatures of the artifact at digest and checks them against c; the error
// wraps ErrUntrusted and says which requirement is not met, and why.
func (c *Config) Verify(ctx context.Context, digest name.Digest, opts ...remote.Option) error {
	if c.broken != nil {
		return fmt.Errorf("%w: the verification config cannot be used, so no module is trusted: %v", ErrUntrusted, c.broken)
	}
	sigs, err := Fetch(ctx, digest, opts...)
	if err != nil {
		return err // the registry failed us, which says nothing of the signatures: retried
	}
	if len(sigs) == 0 {
		return fmt.Errorf("%w: %s has no cosign signature (looked for %s)", ErrUntrusted, digest.DigestStr(), SignatureTag(digest))
	}
	return c.Check(digest.DigestStr(), sigs)
}

// Check checks signatures, already fetched, of the artifact of manifest digest (sha256:<hex>).
func (c *Config) Check(digest string, sigs []Signature) error {
	if c.broken != nil {
		return fmt.Errorf("%w: the verification config cannot be used, so no module is trusted: %v", ErrUntrusted, c.broken)
	}
	var unmet []string
	for i := range c.AllOf {
		if why := c.AllOf[i].metBy(digest, sigs, c.trust); why != "" {
			unmet = append(unmet, fmt.Sprintf("allOf[%d] (%s): %s", i, &c.AllOf[i], why))
		}
	}
	if c.AnyOf != nil && len(c.AnyOf.Signatures) > 0 {
		met, whys := 0, []string{}
		for i := range c.AnyOf.Signatures {
			if why := c.AnyOf.Signatures[i].metBy(digest, sigs, c.trust); why == "" {
				met++
			} else {
				whys = append(whys, fmt.Sprintf("anyOf.signatures[%d] (%s): %s", i, &c.AnyOf.Signatures[i], why))
			}
		}
		if met < c.AnyOf.MinimumMatches {
			unmet = append(unmet, fmt.Sprintf("anyOf: %d of %d required signatures met (%s)", met, c.AnyOf.MinimumMatches, strings.Join(whys, "; ")))
		}
	}
	if len(unmet) > 0 {
		return fmt.Errorf("%w: %s: %s", ErrUntrusted, digest, strings.Join(unmet, "; "))
	}
	return nil
}

// metBy returns "" when one of sigs meets r, and otherwise why none does: the reason of the
// signature that came closest, since that is the one its signer meant to meet r with.
func (r *Requirement) metBy(digest string, sigs []Signature, trust *TrustRoot) string {
	best, why := -1, r.noSignatureWhy()
	for _, s := range sigs {
		stage, w := r.check(digest, s, trust)
		if w == "" {
			return ""
		}
		if stage > best {
			best, why = stage, w
		}
	}
	return why
}

// noSignatureWhy is why r is unmet when no signature gets past its first check.
func (r *Requirement) noSignatureWhy() string {
	switch r.Kind {
	case KindGenericIssuer, KindGitHubAction:
		return "no signature is keyless (none carries a Fulcio certificate)"
	case KindCertificate:
		return "no signature is made with the certificate's key"
	}
	return "no signature is made with its key"
}

// check checks one signature against r and returns "" when it meets r, or how far it got (the
// higher, the closer) and why it does not.
func (r *Requirement) check(digest string, s Signature, trust *TrustRoot) (int, string) {
	switch r.Kind {
	case KindPubKey:
		if r.verifier == nil {
			return 0, "not a checkable requirement"
		}
		if err := r.verifier.VerifySignature(bytes.NewReader(s.Signature), bytes.NewReader(s.Payload)); err != nil {
			return 0, r.noSignatureWhy()
		}
		if why := payloadMismatch(digest, s.Payload, r.Annotations); why != "" {
			return 1, "a signature made with its key " + why
		}
		return 0, ""
	case KindGenericIssuer, KindGitHubAction:
		return r.checkKeyless(digest, s, trust)
	case KindCertificate:
		return r.checkCertificate(digest, s, trust)
	}
	return 0, "not a checkable requirement"
}

// checkKeyless checks a keyless signature: who its certificate names, that it verifies with the
// certificate's key, when it was made (its Rekor bundle), that the certificate was valid then
// and chains to a trusted Fulcio CA, and what it signs.
func (r *Requirement) checkKeyless(digest string, s Signature, trust *TrustRoot) (int, string) {
	if s.Certificate == "" {
		return 0, r.noSignatureWhy()
	}
	if trust == nil {
		return 1, ErrNoTrustRoot.Error()
	}
	certs, err := parseCertificates(s.Certificate)
	if err != nil {
		return 1, fmt.Sprintf("a keyless signature's certificate is unreadable: %v", err)
	}
	leaf := certs[0]
	id, err := certificateIdentity(leaf)
	if err != nil {
		return 1, "a keyless signature: " + err.Error()
	}
	if closeness, why := r.identityMismatch(id); why != "" {
		return 2 + closeness, why
	}
	by := "a keyless signature by " + id.String()
	v, err := signature.LoadVerifier(leaf.PublicKey, crypto.SHA256)
	if err != nil {
		return 4, fmt.Sprintf("%s: its certificate's key: %v", by, err)
	}
	if err := v.VerifySignature(bytes.NewReader(s.Signature), bytes.NewReader(s.Payload)); err != nil {
		return 4, by + " does not verify with its certificate's key"
	}
	at, err := trust.signedAt(s, leaf.PublicKey)
	if err != nil {
		return 5, fmt.Sprintf("%s: %v", by, err)
	}
	if at.Before(leaf.NotBefore) || at.After(leaf.NotAfter) {
		return 6, fmt.Sprintf("%s was made at %s, outside its certificate's validity (%s to %s)", by,
			at.UTC().Format(time.RFC3339), leaf.NotBefore.UTC().Format(time.RFC3339), leaf.NotAfter.UTC().Format(time.RFC3339))
	}
	if err := trust.chainsAt(leaf, chainIntermediates(s.Chain), at); err != nil {
		return 7, fmt.Sprintf("%s: %v", by, err)
	}
	if why := payloadMismatch(digest, s.Payload, r.Annotations); why != "" {
		return 8, by + " " + why
	}
	return 0, ""
}

// chainIntermediates are the certificates of a chain annotation that may link a leaf to a
// trusted root; self-signed ones are left out, since only the trust root says which roots count.
func chainIntermediates(chain string) []*x509.Certificate {
	if chain == "" {
		return nil
	}
	certs, err := parseCertificates(chain)
	if err != nil {
		return nil // the trust root's own intermediates may still do
	}
	var out []*x509.Certificate
	for _, c := range certs {
		if !bytes.Equal(c.RawIssuer, c.RawSubject) {
			out = append(out, c)
		}
	}
	return out
}

// payloadMismatch says why a signed simple-signing payload is not about the artifact of digest
// with the annotations, "" when it is.
func payloadMismatch(digest string, body []byte, annotations map[string]string) string {
	var p payload.SimpleContainerImage
	if err := json.Unmarshal(body, &p); err != nil {
		return "has a payload that is not simple-signing JSON"
	}
	if p.Critical.Type != payload.CosignSignatureType {
		return fmt.Sprintf("is of type %q, not a cosign container image signature", p.Critical.Type)
	}
	if p.Critical.Image.DockerManifestDigest != digest {
		return fmt.Sprintf("is of %s, not this artifact", p.Critical.Image.DockerManifestDigest)
	}
	if missing := missingAnnotations(annotations, p.Optional); missing != "" {
		return "lacks the annotations " + missing
	}
	return ""
}

// missingAnnotations names the annotations of want that got does not have with the same value.
func missingAnnotations(want map[string]string, got map[string]any) string {
	var missing []string
	for k, v := range want {
		if s, ok := got[k].(string); !ok || s != v {
			missing = append(missing, k+"="+v)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	slices.Sort(missing)
	return strings.Join(missing, ", ")
}
