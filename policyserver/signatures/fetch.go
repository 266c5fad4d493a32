package signatures

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Cosign's names for its signature image.
const (
	// SimpleSigningMediaType is the media type of a signature layer.
	SimpleSigningMediaType types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// SignatureAnnotation holds the base64 signature of the layer's payload.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
	// CertificateAnnotation and ChainAnnotation hold a keyless signature's Fulcio certificate
	// and its chain, PEM.
	CertificateAnnotation = "dev.sigstore.cosign/certificate"
	ChainAnnotation       = "dev.sigstore.cosign/chain"
	// BundleAnnotation holds the Rekor bundle (RekorBundle JSON) of a signature that was
	// logged: when it was made, signed by the log.
	BundleAnnotation = "dev.sigstore.cosign/bundle"
)

// maxPayloadBytes bounds a signature layer: a simple-signing payload is a few hundred bytes, and
// the registry is not trusted to be small.
const maxPayloadBytes = 1 << 20

// maxSignatures bounds the layers read from one signature image.
const maxSignatures = 64

// Signature is one layer of a cosign signature image.
type Signature struct {
	Payload   []byte
	Signature []byte
	// Certificate and Chain are set on keyless signatures, PEM.
	Certificate, Chain string
	// Bundle is the Rekor bundle, JSON, of a signature that was logged.
	Bundle string
}

// SignatureTag is where cosign keeps the signatures of digest: sha256-<hex>.sig in its
// repository.
func SignatureTag(digest name.Digest) name.Tag {
	return digest.Context().Tag(strings.Replace(digest.DigestStr(), ":", "-", 1) + ".sig")
}

// Fetch reads the signatures of the artifact at digest; none (no signature image) is an empty
// list, not an error.
func Fetch(ctx context.Context, digest name.Digest, opts ...remote.Option) ([]Signature, error) {
	tag := SignatureTag(digest)
	img, err := remote.Image(tag, append([]remote.Option{remote.WithContext(ctx)}, opts...)...)
	if err != nil {
		var terr *transport.Error
		if errors.As(err, &terr) && terr.StatusCode == http.StatusNotFound {
			return nil, nil
		}
		return nil, fmt.Errorf("get signatures %s: %w", tag, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return nil, fmt.Errorf("get signatures %s: %w", tag, err)
	}
	var sigs []Signature
	for _, l := range m.Layers {
		if l.MediaType != SimpleSigningMediaType || len(sigs) == maxSignatures {
			continue
		}
		if l.Size > maxPayloadBytes {
			continue
		}
		sig, err := base64.StdEncoding.DecodeString(l.Annotations[SignatureAnnotation])
		if err != nil || len(sig) == 0 {
			continue // not a signature this package can check; others may be
		}
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			return nil, fmt.Errorf("get signatures %s: %w", tag, err)
		}
		rc, err := layer.Compressed() // verified against its digest by go-containerregistry
		if err != nil {
			return nil, fmt.Errorf("get signatures %s: %w", tag, err)
		}
		payload, err := io.ReadAll(io.LimitReader(rc, maxPayloadBytes))
		rc.Close()
		if err != nil {
			return nil, fmt.Errorf("get signatures %s: %w", tag, err)
		}
		sigs = append(sigs, Signature{Payload: payload, Signature: sig,
			Certificate: l.Annotations[CertificateAnnotation], Chain: l.Annotations[ChainAnnotation], Bundle: l.Annotations[BundleAnnotation]})
	}
	return sigs, nil
}
