package artifact

import (
	"bytes"
	"context"
	"crypto"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"github.com/secure-systems-lab/go-securesystemslib/encrypted"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"
)

const (
	// SimpleSigningMediaType is the layer of a cosign signature.
	SimpleSigningMediaType types.MediaType = "application/vnd.dev.cosign.simplesigning.v1+json"
	// SignatureAnnotation holds the base64 signature of the layer's payload.
	SignatureAnnotation = "dev.cosignproject.cosign/signature"
)

// SignatureTag is where cosign keeps the signature of digest: sha256-<hex>.sig in its repository.
func SignatureTag(digest name.Digest) name.Tag {
	return digest.Context().Tag(strings.Replace(digest.DigestStr(), ":", "-", 1) + ".sig")
}

// Sign signs the artifact at digest as `cosign sign --key` does and pushes the signature.
func Sign(ctx context.Context, digest name.Digest, signer signature.Signer, opts Options) (name.Tag, error) {
	body, err := payload.Cosign{Image: digest}.MarshalJSON()
	if err != nil {
		return name.Tag{}, err
	}
	sig, err := signer.SignMessage(bytes.NewReader(body))
	if err != nil {
		return name.Tag{}, fmt.Errorf("sign %s: %w", digest, err)
	}
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:       static.NewLayer(body, SimpleSigningMediaType),
		Annotations: map[string]string{SignatureAnnotation: base64.StdEncoding.EncodeToString(sig)},
	})
	if err != nil {
		return name.Tag{}, err
	}
	tag := SignatureTag(digest)
	if err := remote.Write(tag, img, opts.remote(ctx)...); err != nil {
		return name.Tag{}, fmt.Errorf("push signature %s: %w", tag, err)
	}
	return tag, nil
}

// Verify checks that the signature cosign would find for digest is valid under verifier and
// names digest.
func Verify(ctx context.Context, digest name.Digest, verifier signature.Verifier, opts Options) error {
	tag := SignatureTag(digest)
	img, err := remote.Image(tag, opts.remote(ctx)...)
	if err != nil {
		return fmt.Errorf("get signature %s: %w", tag, err)
	}
	m, err := img.Manifest()
	if err != nil {
		return err
	}
	var errs []error
	for _, l := range m.Layers {
		if l.MediaType != SimpleSigningMediaType {
			continue
		}
		layer, err := img.LayerByDigest(l.Digest)
		if err != nil {
			return err
		}
		rc, err := layer.Compressed()
		if err != nil {
			return err
		}
		var body bytes.Buffer
		_, err = body.ReadFrom(rc)
		rc.Close()
		if err != nil {
			return err
		}
		sig, err := base64.StdEncoding.DecodeString(l.Annotations[SignatureAnnotation])
		if err != nil {
			errs = append(errs, fmt.Errorf("signature annotation: %w", err))
			continue
		}
		if err := verifier.VerifySignature(bytes.NewReader(sig), bytes.NewReader(body.Bytes())); err != nil {
			errs = append(errs, err)
			continue
		}
		var p payload.SimpleContainerImage
		if err := json.Unmarshal(body.Bytes(), &p); err != nil {
			errs = append(errs, err)
			continue
		}
		if p.Critical.Image.DockerManifestDigest != digest.DigestStr() {
			errs = append(errs, fmt.Errorf("signature is of %s, not %s", p.Critical.Image.DockerManifestDigest, digest.DigestStr()))
			continue
		}
		return nil
	}
	if len(errs) == 0 {
		return fmt.Errorf("%s holds no cosign signature", tag)
	}
	return fmt.Errorf("no valid signature for %s: %w", digest, errors.Join(errs...))
}

// LoadPrivateKey reads a cosign private key (an encrypted PEM from `cosign generate-key-pair`,
// decrypted with password) or an unencrypted PKCS#8 or EC PEM key.
func LoadPrivateKey(pemBytes, password []byte) (signature.SignerVerifier, error) {
	block, _ := pem.Decode(pemBytes)
	if block == nil {
		return nil, errors.New("the key is not PEM")
	}
	der := block.Bytes
	switch block.Type {
	case "ENCRYPTED SIGSTORE PRIVATE KEY", "ENCRYPTED COSIGN PRIVATE KEY":
		var err error
		if der, err = encrypted.Decrypt(block.Bytes, password); err != nil {
			return nil, fmt.Errorf("decrypt the key (is COSIGN_PASSWORD right?): %w", err)
		}
	case "PRIVATE KEY", "EC PRIVATE KEY":
	default:
		return nil, fmt.Errorf("unsupported PEM block %q", block.Type)
	}
	var key crypto.PrivateKey
	key, err := x509.ParsePKCS8PrivateKey(der)
	if err != nil && block.Type == "EC PRIVATE KEY" {
		key, err = x509.ParseECPrivateKey(der)
	}
	if err != nil {
		return nil, fmt.Errorf("parse the key: %w", err)
	}
	return signature.LoadSignerVerifier(key, crypto.SHA256)
}
