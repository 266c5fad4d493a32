package capabilities

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"k8s.io/utils/clock"

	"regent.dev/regent/policyserver/signatures"
)

// registries serves the oci namespace: what a registry says about an image.
type registries struct {
	transport http.RoundTripper
	nameOpts  []name.Option
	cache     *ttlCache
	// sigstore is the trust root of keyless verification requests; nil refuses them.
	sigstore *signatures.TrustRoot
	clock    clock.PassiveClock
}

func newRegistries(cas *x509.CertPool, insecure bool, cache *ttlCache, sigstore *signatures.TrustRoot, clk clock.PassiveClock) *registries {
	t := http.DefaultTransport.(*http.Transport).Clone()
	if cas != nil {
		t.TLSClientConfig = &tls.Config{RootCAs: cas, MinVersion: tls.VersionTLS12}
	}
	r := &registries{transport: t, cache: cache, sigstore: sigstore, clock: clk}
	if insecure {
		r.nameOpts = append(r.nameOpts, name.Insecure)
	}
	return r
}

func (r *registries) remoteOptions(ctx context.Context) []remote.Option {
	return []remote.Option{remote.WithContext(ctx), remote.WithTransport(r.transport), remote.WithAuthFromKeychain(authn.DefaultKeychain)}
}

// image reads the payload both oci operations take: the image reference as a JSON string.
func (r *registries) image(operation string, payload []byte) (name.Reference, string, error) {
	var image string
	if err := json.Unmarshal(payload, &image); err != nil {
		return nil, "", fmt.Errorf("oci %s: payload must be an image reference as a JSON string: %w", operation, err)
	}
	ref, err := name.ParseReference(image, r.nameOpts...)
	if err != nil {
		return nil, "", fmt.Errorf("oci %s: %w", operation, err)
	}
	return ref, image, nil
}

// manifestDigest answers {"digest": …}: the digest of the manifest (or index) the reference
// names, which a policy uses to pin a tag.
func (r *registries) manifestDigest(ctx context.Context, payload []byte) ([]byte, error) {
	ref, image, err := r.image("v1/manifest_digest", payload)
	if err != nil {
		return nil, err
	}
	return r.cache.fetch(ctx, "digest\x00"+image, false, func(ctx context.Context) ([]byte, error) {
		// HEAD costs no manifest download (nor, on Docker Hub, a pull); registries that answer it
		// without a digest get a GET.
		desc, err := remote.Head(ref, r.remoteOptions(ctx)...)
		if err != nil {
			full, gerr := remote.Get(ref, r.remoteOptions(ctx)...)
			if gerr != nil {
				return nil, fmt.Errorf("oci v1/manifest_digest %s: %w", image, gerr)
			}
			desc = &full.Descriptor
		}
		return json.Marshal(struct {
			Digest string `json:"digest"`
		}{desc.Digest.String()})
	})
}

// manifest answers with the manifest or index as the registry serves it.
func (r *registries) manifest(ctx context.Context, payload []byte) ([]byte, error) {
	ref, image, err := r.image("v1/oci_manifest", payload)
	if err != nil {
		return nil, err
	}
	return r.cache.fetch(ctx, "manifest\x00"+image, false, func(ctx context.Context) ([]byte, error) {
		full, err := remote.Get(ref, r.remoteOptions(ctx)...)
		if err != nil {
			return nil, fmt.Errorf("oci v1/oci_manifest %s: %w", image, err)
		}
		return full.Manifest, nil
	})
}
