package templates

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// The names OCM's propagator and config-policy-controller agree on, kept so that a hub or a
// managed cluster running OCM's side of the exchange interoperates with Regent's.
const (
	// EncryptionKeySecret is the Secret, in a cluster's namespace on the hub and on the managed
	// cluster, whose data holds the cluster's AES-256 "key" and, after a rotation, "previousKey".
	EncryptionKeySecret = "policy-encryption-key"
	// IVAnnotation on a replicated policy and on its policy templates holds the base64
	// initialization vector the templates' values were encrypted with.
	IVAnnotation = "policy.open-cluster-management.io/encryption-iv"
	// LastRotatedAnnotation on the key Secret records when the key was made (RFC 3339).
	LastRotatedAnnotation = "policy.open-cluster-management.io/last-rotated"
	// EncryptedPrefix starts every encrypted value: "$ocm_encrypted:<base64 of the ciphertext>".
	EncryptedPrefix = "$ocm_encrypted:"
	// IVSize is AES's block size, which CBC's initialization vector must match.
	IVSize = aes.BlockSize
	// KeySize is AES-256's key length.
	KeySize = 32
)

// Encryption is what encrypts values for one managed cluster and one policy.
type Encryption struct {
	Key []byte
	IV  []byte
}

// NewKey returns a random AES-256 key.
func NewKey() ([]byte, error) { return randomBytes(KeySize) }

// NewIV returns a random initialization vector.
func NewIV() ([]byte, error) { return randomBytes(IVSize) }

func randomBytes(n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("read %d random bytes: %w", n, err)
	}
	return b, nil
}

// ParseIV decodes an IVAnnotation value.
func ParseIV(annotation string) ([]byte, error) {
	iv, err := base64.StdEncoding.DecodeString(annotation)
	if err != nil {
		return nil, fmt.Errorf("the %q annotation is not base64: %w", IVAnnotation, err)
	}
	if len(iv) != IVSize {
		return nil, fmt.Errorf("the %q annotation value is not a valid initialization vector: %d bytes, want %d", IVAnnotation, len(iv), IVSize)
	}
	return iv, nil
}

// Encrypt returns value encrypted with AES-CBC (PKCS #7 padding) as "$ocm_encrypted:<base64>",
// the form OCM's protect writes. An empty value stays empty, as in OCM. The same key, IV and
// value always give the same text: a replica whose inputs did not change is not rewritten.
func (e Encryption) Encrypt(value string) (string, error) {
	if value == "" {
		return "", nil
	}
	block, err := aes.NewCipher(e.Key)
	if err != nil {
		return "", fmt.Errorf("invalid AES key: %w", err)
	}
	if len(e.IV) != IVSize {
		return "", fmt.Errorf("invalid initialization vector: %d bytes, want %d", len(e.IV), IVSize)
	}
	pad := IVSize - len(value)%IVSize
	plain := append([]byte(value), bytes.Repeat([]byte{byte(pad)}, pad)...)
	out := make([]byte, len(plain))
	cipher.NewCBCEncrypter(block, e.IV).CryptBlocks(out, plain)
	return EncryptedPrefix + base64.StdEncoding.EncodeToString(out), nil
}

// Decryption holds what a managed cluster decrypts with: the key Secret's key and, after a
// rotation, its previous key, tried when the current one does not fit.
type Decryption struct {
	Key, PreviousKey []byte
	IV               []byte
}

// ErrDecrypt marks a value that no key decrypts.
var ErrDecrypt = errors.New("decryption failed")

// Decrypt decrypts the base64 ciphertext of one encrypted value (without its prefix).
func (d Decryption) Decrypt(b64 string) (string, error) {
	if len(d.IV) != IVSize {
		return "", fmt.Errorf("invalid initialization vector: %d bytes, want %d", len(d.IV), IVSize)
	}
	ct, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return "", fmt.Errorf("%w: the encrypted value is not base64: %v", ErrDecrypt, err)
	}
	if len(ct) == 0 || len(ct)%IVSize != 0 {
		return "", fmt.Errorf("%w: the encrypted value is %d bytes, not whole AES blocks", ErrDecrypt, len(ct))
	}
	var last error
	for i, key := range [][]byte{d.Key, d.PreviousKey} {
		if i == 1 && len(key) == 0 {
			break
		}
		block, err := aes.NewCipher(key)
		if err != nil {
			last = fmt.Errorf("invalid AES key: %w", err)
			continue
		}
		plain := make([]byte, len(ct))
		cipher.NewCBCDecrypter(block, d.IV).CryptBlocks(plain, ct)
		// A wrong key almost always leaves invalid padding, which is how the fallback is chosen.
		if out, ok := unpad(plain); ok {
			return string(out), nil
		}
		last = errors.New("the value does not decrypt with this key (invalid padding)")
	}
	return "", fmt.Errorf("%w: %v", ErrDecrypt, last)
}

func unpad(b []byte) ([]byte, bool) {
	n := int(b[len(b)-1])
	if n == 0 || n > IVSize || n > len(b) {
		return nil, false
	}
	for _, c := range b[len(b)-n:] {
		if int(c) != n {
			return nil, false
		}
	}
	return b[:len(b)-n], true
}

var encryptedRe = regexp.MustCompile(regexp.QuoteMeta(EncryptedPrefix) + `([A-Za-z0-9+/=]+)`)

// HasEncrypted reports whether text holds an encrypted value.
func HasEncrypted(text []byte) bool { return bytes.Contains(text, []byte(EncryptedPrefix)) }

// DecryptJSON replaces every encrypted value inside the JSON strings of raw by its plaintext,
// escaped for JSON, so templates that run afterwards see the value (as OCM decrypts before
// resolving managed-cluster templates).
func (d Decryption) DecryptJSON(raw []byte) ([]byte, error) {
	return d.replace(raw, func(s string) string {
		q, _ := json.Marshal(s)
		return string(q[1 : len(q)-1])
	})
}

// DecryptText is DecryptJSON for YAML text (object-templates-raw): a plaintext's newlines are
// escaped so they do not change the document's structure, as OCM does.
func (d Decryption) DecryptText(text string) (string, error) {
	out, err := d.replace([]byte(text), func(s string) string { return strings.ReplaceAll(s, "\n", `\n`) })
	return string(out), err
}

func (d Decryption) replace(raw []byte, escape func(string) string) ([]byte, error) {
	var first error
	out := encryptedRe.ReplaceAllFunc(raw, func(m []byte) []byte {
		if first != nil {
			return m
		}
		plain, err := d.Decrypt(string(m[len(EncryptedPrefix):]))
		if err != nil {
			first = err
			return m
		}
		return []byte(escape(plain))
	})
	if first != nil {
		return nil, first
	}
	return out, nil
}

var (
	hubActionRe      = regexp.MustCompile(`(?s)` + regexp.QuoteMeta(HubStart) + `(.*?)` + regexp.QuoteMeta(HubStop))
	encryptingFuncRe = regexp.MustCompile(`\b(?:fromSecret|copySecretData|protect)\b`)
)

// UsesEncryption reports whether hub templates in text produce encrypted values: fromSecret,
// copySecretData or protect. Only those replicas need the cluster's key and an IV.
func UsesEncryption(text []byte) bool {
	for _, m := range hubActionRe.FindAllSubmatch(text, -1) {
		if encryptingFuncRe.Match(m[1]) {
			return true
		}
	}
	return false
}
