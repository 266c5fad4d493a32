package signatures

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
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
		if why := c.AllOf[i].metBy(digest, sigs); why != "" {
			unmet = append(unmet, fmt.Sprintf("allOf[%d] (%s): %s", i, &c.AllOf[i], why))
		}
	}
	if c.AnyOf != nil && len(c.AnyOf.Signatures) > 0 {
		met, whys := 0, []string{}
		for i := range c.AnyOf.Signatures {
			if why := c.AnyOf.Signatures[i].metBy(digest, sigs); why == "" {
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

// metBy returns "" when one of sigs meets r, and otherwise why none does.
func (r *Requirement) metBy(digest string, sigs []Signature) string {
	why := "no signature is made with its key"
	for _, s := range sigs {
		if r.verifier == nil {
			return "not a checkable requirement"
		}
		if err := r.verifier.VerifySignature(bytes.NewReader(s.Signature), bytes.NewReader(s.Payload)); err != nil {
			continue
		}
		// Signed with the key: what it says must be about this artifact, with the annotations.
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(s.Payload, &p); err != nil {
			why = "a signature made with its key has a payload that is not simple-signing JSON"
			continue
		}
		if p.Critical.Type != payload.CosignSignatureType {
			why = fmt.Sprintf("a signature made with its key is of type %q, not a cosign container image signature", p.Critical.Type)
			continue
		}
		if p.Critical.Image.DockerManifestDigest != digest {
			why = fmt.Sprintf("a signature made with its key is of %s, not this artifact", p.Critical.Image.DockerManifestDigest)
			continue
		}
		if missing := missingAnnotations(r.Annotations, p.Optional); missing != "" {
			why = "a signature made with its key lacks the annotations " + missing
			continue
		}
		return ""
	}
	return why
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
