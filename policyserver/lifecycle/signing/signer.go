package signing

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"encoding/base64"
	"errors"
	"fmt"
	"os"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
)

// SignatureSuffix names a file's signature: <file>.sig.
const SignatureSuffix = ".sig"

// Signer signs cache files with the Secret's signer.key.
type Signer struct{ s signature.Signer }

// NewSigner reads signer.key from the Secret's data.
func NewSigner(data map[string][]byte) (*Signer, error) {
	pemKey := data[SignerKey]
	if len(pemKey) == 0 {
		return nil, fmt.Errorf("signing secret has no %s", SignerKey)
	}
	priv, err := cryptoutils.UnmarshalPEMToPrivateKey(pemKey, cryptoutils.SkipPassword)
	if err != nil {
		return nil, fmt.Errorf("parse %s: %w", SignerKey, err)
	}
	ec, ok := priv.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s is a %T, want an ECDSA key", SignerKey, priv)
	}
	s, err := signature.LoadECDSASigner(ec, crypto.SHA256)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", SignerKey, err)
	}
	return &Signer{s: s}, nil
}

// Sign returns the base64 signature of content.
func (s *Signer) Sign(content []byte) ([]byte, error) {
	sig, err := s.s.SignMessage(bytes.NewReader(content))
	if err != nil {
		return nil, err
	}
	return []byte(base64.StdEncoding.EncodeToString(sig)), nil
}

// SignFile writes path's signature to path.sig.
func (s *Signer) SignFile(path string) error {
	content, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("sign %s: %w", path, err)
	}
	sig, err := s.Sign(content)
	if err != nil {
		return fmt.Errorf("sign %s: %w", path, err)
	}
	if err := os.WriteFile(path+SignatureSuffix, sig, 0o644); err != nil {
		return fmt.Errorf("sign %s: %w", path, err)
	}
	return nil
}

// ErrBadSignature is wrapped by every verification failure: no signature, a malformed one, or one
// that does not match the bytes.
var ErrBadSignature = errors.New("signature invalid")
