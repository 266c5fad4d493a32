package configpolicy

import (
	"context"
	"encoding/base64"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/templates"
)

// decrypter decrypts, for one evaluation, the values hub templates encrypted for this cluster
// ("$ocm_encrypted:…"): with the key the hub made for the cluster, synced into the policy's
// namespace as Secret policy-encryption-key, falling back to its previousKey while the hub has
// not yet re-encrypted after a rotation, and the IV the hub put on the policy. The key Secret is
// read through the policy's watches, so a new key re-evaluates the policy.
type decrypter struct {
	policy *policyv1.ConfigurationPolicy
	reader *clusterReader
	d      *templates.Decryption
}

func (d *decrypter) config(ctx context.Context) (*templates.Decryption, error) {
	if d.d != nil {
		return d.d, nil
	}
	ivText, ok := d.policy.GetAnnotations()[templates.IVAnnotation]
	if !ok {
		return nil, fmt.Errorf("the policy holds encrypted values but no %q annotation to decrypt them with", templates.IVAnnotation)
	}
	iv, err := templates.ParseIV(ivText)
	if err != nil {
		return nil, err
	}
	ns := d.policy.GetNamespace()
	secret, err := d.reader.Get(ctx, "v1", "Secret", ns, templates.EncryptionKeySecret)
	if err != nil {
		return nil, fmt.Errorf("failed to get the encryption key from Secret %s/%s: %w", ns, templates.EncryptionKeySecret, err)
	}
	if secret == nil {
		return nil, fmt.Errorf("failed to get the encryption key from Secret %s/%s: not found (the hub's key has not reached this cluster)", ns, templates.EncryptionKeySecret)
	}
	data, _, _ := unstructured.NestedStringMap(secret.Object, "data")
	key, err := decodeKey(data["key"])
	if err != nil {
		return nil, fmt.Errorf("the encryption key Secret %s/%s: key: %w", ns, templates.EncryptionKeySecret, err)
	}
	var previous []byte
	if data["previousKey"] != "" {
		if previous, err = decodeKey(data["previousKey"]); err != nil {
			return nil, fmt.Errorf("the encryption key Secret %s/%s: previousKey: %w", ns, templates.EncryptionKeySecret, err)
		}
	}
	d.d = &templates.Decryption{Key: key, PreviousKey: previous, IV: iv}
	return d.d, nil
}

// json decrypts the encrypted values of an object definition.
func (d *decrypter) json(ctx context.Context, raw []byte) ([]byte, error) {
	if !templates.HasEncrypted(raw) {
		return raw, nil
	}
	cfg, err := d.config(ctx)
	if err != nil {
		return nil, err
	}
	return cfg.DecryptJSON(raw)
}

// text decrypts the encrypted values of object-templates-raw.
func (d *decrypter) text(ctx context.Context, text string) (string, error) {
	if !templates.HasEncrypted([]byte(text)) {
		return text, nil
	}
	cfg, err := d.config(ctx)
	if err != nil {
		return "", err
	}
	return cfg.DecryptText(text)
}

// decodeKey decodes a key Secret value as the apiserver returns it (base64).
func decodeKey(b64 string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		return nil, fmt.Errorf("not base64: %w", err)
	}
	if len(k) != templates.KeySize {
		return nil, fmt.Errorf("%d bytes, want an AES-256 key of %d", len(k), templates.KeySize)
	}
	return k, nil
}
