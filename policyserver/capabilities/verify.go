package capabilities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"regent.dev/regent/policyserver/signatures"
)

// verifyRequest is any of Kubewarden's SigstoreVerificationInput variants; which fields count
// depends on the variant.
type verifyRequest struct {
	Image       string          `json:"image"`
	Annotations json.RawMessage `json:"annotations"`
	// SigstorePubKeyVerify: PEM keys that must all have signed the image.
	PubKeys []string `json:"pub_keys"`
	// SigstoreKeylessVerify: identities that must all have signed it, each exactly.
	Keyless []struct {
		Issuer  string `json:"issuer"`
		Subject string `json:"subject"`
	} `json:"keyless"`
	// SigstoreKeylessPrefixVerify: identities whose subject is under a URL prefix.
	KeylessPrefix []struct {
		Issuer    string `json:"issuer"`
		URLPrefix string `json:"url_prefix"`
	} `json:"keyless_prefix"`
	// SigstoreGithubActionsVerify: a workflow of owner (and repo) on GitHub Actions.
	Owner string  `json:"owner"`
	Repo  *string `json:"repo"`
	// SigstoreCertificateVerify: a certificate whose key signed the image, the chain it must
	// lead to, and whether the signature must have been logged.
	Certificate        pemBytes   `json:"certificate"`
	CertificateChain   []pemBytes `json:"certificate_chain"`
	RequireRekorBundle bool       `json:"require_rekor_bundle"`
}

// pemBytes is PEM text as the SDKs send it: an array of its bytes (Rust's Vec<u8>, Go's []rune)
// or, accepted too, a string.
type pemBytes []byte

func (p *pemBytes) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		*p = []byte(s)
		return nil
	}
	var codes []rune
	if err := json.Unmarshal(b, &codes); err != nil {
		return errors.New("a PEM certificate must be an array of its bytes or a string")
	}
	*p = []byte(string(codes))
	return nil
}

// verifyKinds are the variants served, in both versions (Kubewarden's v1 defines only the first
// two; a v1 request of the others means the same here).
var verifyKinds = map[string]bool{
	"SigstorePubKeyVerify": true, "SigstoreKeylessVerify": true, "SigstoreKeylessPrefixVerify": true,
	"SigstoreGithubActionsVerify": true, "SigstoreCertificateVerify": true,
}

// verifyV1 serves oci/v1/verify, whose request is tagged externally:
// {"SigstorePubKeyVerify": {...}}.
func (r *registries) verifyV1(ctx context.Context, payload []byte) ([]byte, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(payload, &req); err != nil || len(req) != 1 {
		return nil, fmt.Errorf("oci v1/verify: the request must be one SigstoreVerificationInputV1 variant: %v", err)
	}
	for kind, body := range req {
		if !verifyKinds[kind] {
			return nil, unservedVerification("v1/verify", kind)
		}
		var v verifyRequest
		if err := json.Unmarshal(body, &v); err != nil {
			return nil, fmt.Errorf("oci v1/verify %s: %w", kind, err)
		}
		return r.verify(ctx, "v1/verify", kind, payload, v)
	}
	return nil, errors.New("unreachable")
}

// verifyV2 serves oci/v2/verify, whose request is tagged internally:
// {"type": "SigstorePubKeyVerify", ...}.
func (r *registries) verifyV2(ctx context.Context, payload []byte) ([]byte, error) {
	var req struct {
		Type string `json:"type"`
		verifyRequest
	}
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, fmt.Errorf("oci v2/verify: %w", err)
	}
	if !verifyKinds[req.Type] {
		return nil, unservedVerification("v2/verify", req.Type)
	}
	return r.verify(ctx, "v2/verify", req.Type, payload, req.verifyRequest)
}

func unservedVerification(op, kind string) error {
	return fmt.Errorf("oci %s %q is %w: the variants are SigstorePubKeyVerify, SigstoreKeylessVerify, SigstoreKeylessPrefixVerify, SigstoreGithubActionsVerify and SigstoreCertificateVerify", op, kind, ErrNotServed)
}

// requirements turns a request into the verification-config requirements it stands for, as
// Kubewarden does: all must be met.
func (r *registries) requirements(kind string, req verifyRequest, annotations map[string]string) ([]signatures.Requirement, error) {
	var reqs []signatures.Requirement
	switch kind {
	case "SigstorePubKeyVerify":
		if len(req.PubKeys) == 0 {
			return nil, errors.New("no pub_keys: nothing to verify against")
		}
		for _, k := range req.PubKeys {
			reqs = append(reqs, signatures.Requirement{Kind: signatures.KindPubKey, Key: k, Annotations: annotations})
		}
	case "SigstoreKeylessVerify":
		if len(req.Keyless) == 0 {
			return nil, errors.New("no keyless identities: nothing to verify against")
		}
		for _, k := range req.Keyless {
			reqs = append(reqs, signatures.Requirement{Kind: signatures.KindGenericIssuer, Issuer: k.Issuer,
				Subject: &signatures.Subject{Equal: k.Subject}, Annotations: annotations})
		}
	case "SigstoreKeylessPrefixVerify":
		if len(req.KeylessPrefix) == 0 {
			return nil, errors.New("no keyless_prefix identities: nothing to verify against")
		}
		for _, k := range req.KeylessPrefix {
			reqs = append(reqs, signatures.Requirement{Kind: signatures.KindGenericIssuer, Issuer: k.Issuer,
				Subject: &signatures.Subject{URLPrefix: k.URLPrefix}, Annotations: annotations})
		}
	case "SigstoreGithubActionsVerify":
		g := signatures.Requirement{Kind: signatures.KindGitHubAction, Owner: req.Owner, Annotations: annotations}
		if req.Repo != nil {
			g.Repo = *req.Repo
		}
		reqs = append(reqs, g)
	case "SigstoreCertificateVerify":
		chain := make([][]byte, len(req.CertificateChain))
		for i, c := range req.CertificateChain {
			chain[i] = c
		}
		c, err := signatures.Certificate(req.Certificate, chain, req.RequireRekorBundle, annotations, r.clock.Now())
		if err != nil {
			return nil, err
		}
		reqs = append(reqs, c)
	}
	return reqs, nil
}

// verify answers {"is_trusted": true, "digest": …} when the image's signatures meet the
// request, and an error saying which key, identity or annotation is missing otherwise, as
// Kubewarden does; the answer is reused for ociTTL, like its other registry answers.
func (r *registries) verify(ctx context.Context, op, kind string, payload []byte, req verifyRequest) ([]byte, error) {
	annotations, err := readAnnotations(req.Annotations)
	if err != nil {
		return nil, fmt.Errorf("oci %s %s: annotations: %w", op, kind, err)
	}
	reqs, err := r.requirements(kind, req, annotations)
	if err != nil {
		return nil, fmt.Errorf("oci %s %s: %w", op, kind, err)
	}
	config, err := signatures.AllOf(r.sigstore, reqs...)
	if err != nil {
		return nil, fmt.Errorf("oci %s %s: %w", op, kind, err)
	}
	ref, err := name.ParseReference(req.Image, r.nameOpts...)
	if err != nil {
		return nil, fmt.Errorf("oci %s: %w", op, err)
	}
	return r.cache.fetch(ctx, "verify\x00"+string(payload), false, func(ctx context.Context) ([]byte, error) {
		opts := r.remoteOptions(ctx)
		desc, err := remote.Head(ref, opts...)
		if err != nil {
			full, gerr := remote.Get(ref, opts...)
			if gerr != nil {
				return nil, fmt.Errorf("oci %s %s: %w", op, req.Image, gerr)
			}
			desc = &full.Descriptor
		}
		digest := ref.Context().Digest(desc.Digest.String())
		if err := config.Verify(ctx, digest, opts...); err != nil {
			return nil, fmt.Errorf("oci %s %s: %w", op, req.Image, err)
		}
		return json.Marshal(struct {
			IsTrusted bool   `json:"is_trusted"`
			Digest    string `json:"digest"`
		}{true, desc.Digest.String()})
	})
}

// readAnnotations takes the annotations as a map, as the Rust SDK sends them, or as a list of
// {key, value}, as Kubewarden's protocol notes describe them; null is none.
func readAnnotations(raw json.RawMessage) (map[string]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var m map[string]string
	if err := json.Unmarshal(raw, &m); err == nil {
		return m, nil
	}
	var list []struct{ Key, Value string }
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, errors.New("want an object of strings or a list of {key, value}")
	}
	m = map[string]string{}
	for _, kv := range list {
		m[kv.Key] = kv.Value
	}
	return m, nil
}
