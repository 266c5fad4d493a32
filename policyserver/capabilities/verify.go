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

// pubKeyVerify is the SigstorePubKeyVerify request of Kubewarden's SDKs: the image whose
// signatures to check, the PEM keys that must all have signed it, and the annotations every
// such signature must carry.
type pubKeyVerify struct {
	Image       string          `json:"image"`
	PubKeys     []string        `json:"pub_keys"`
	Annotations json.RawMessage `json:"annotations"`
}

// verifyV1 serves oci/v1/verify, whose request is tagged externally:
// {"SigstorePubKeyVerify": {...}}.
func (r *registries) verifyV1(ctx context.Context, payload []byte) ([]byte, error) {
	var req map[string]json.RawMessage
	if err := json.Unmarshal(payload, &req); err != nil || len(req) != 1 {
		return nil, fmt.Errorf("oci v1/verify: the request must be one SigstoreVerificationInputV1 variant: %v", err)
	}
	for kind, body := range req {
		if kind != "SigstorePubKeyVerify" {
			return nil, unservedVerification("v1/verify", kind)
		}
		var pk pubKeyVerify
		if err := json.Unmarshal(body, &pk); err != nil {
			return nil, fmt.Errorf("oci v1/verify: %w", err)
		}
		return r.verifyPubKeys(ctx, "v1/verify", payload, pk)
	}
	return nil, errors.New("unreachable")
}

// verifyV2 serves oci/v2/verify, whose request is tagged internally:
// {"type": "SigstorePubKeyVerify", ...}.
func (r *registries) verifyV2(ctx context.Context, payload []byte) ([]byte, error) {
	var req struct {
		Type string `json:"type"`
		pubKeyVerify
	}
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, fmt.Errorf("oci v2/verify: %w", err)
	}
	if req.Type != "SigstorePubKeyVerify" {
		return nil, unservedVerification("v2/verify", req.Type)
	}
	return r.verifyPubKeys(ctx, "v2/verify", payload, req.pubKeyVerify)
}

func unservedVerification(op, kind string) error {
	return fmt.Errorf("oci %s %s is %w: only SigstorePubKeyVerify is; keyless and certificate verification are not implemented", op, kind, ErrNotServed)
}

// verifyPubKeys answers {"is_trusted": true, "digest": …} when the image's signatures meet the
// request, and an error saying which key or annotation is missing otherwise, as Kubewarden does;
// the answer is reused for ociTTL, like its other registry answers.
func (r *registries) verifyPubKeys(ctx context.Context, op string, payload []byte, req pubKeyVerify) ([]byte, error) {
	annotations, err := readAnnotations(req.Annotations)
	if err != nil {
		return nil, fmt.Errorf("oci %s: annotations: %w", op, err)
	}
	config, err := signatures.PubKeys(req.PubKeys, annotations)
	if err != nil {
		return nil, fmt.Errorf("oci %s: %w", op, err)
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
