package templates

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// A key of 32 'A's and an IV of 16 'I's: the value OCM's protect gives for "Raleigh" under them
// is what a config-policy-controller of OCM decrypts, so Regent's must be byte for byte the same.
var (
	testKey = bytes.Repeat([]byte{'A'}, KeySize)
	testIV  = bytes.Repeat([]byte{'I'}, IVSize)
)

const raleighUnderTestKey = "$ocm_encrypted:Eud/p3S7TvuP03S9fuNV+w=="

func TestEncrypt_MatchesOCMsFormatAndDecrypts(t *testing.T) {
	got, err := Encryption{Key: testKey, IV: testIV}.Encrypt("Raleigh")
	if err != nil {
		t.Fatal(err)
	}
	if got != raleighUnderTestKey {
		t.Errorf("Encrypt = %q, want OCM's %q", got, raleighUnderTestKey)
	}
	if empty, _ := (Encryption{Key: testKey, IV: testIV}).Encrypt(""); empty != "" {
		t.Errorf("an empty value encrypts to %q, want it left empty", empty)
	}
	// A value a whole block long still gets a block of padding.
	block := strings.Repeat("x", IVSize)
	enc, err := Encryption{Key: testKey, IV: testIV}.Encrypt(block)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := Decryption{Key: testKey, IV: testIV}.Decrypt(strings.TrimPrefix(enc, EncryptedPrefix))
	if err != nil || plain != block {
		t.Errorf("round trip of a whole block: %q, %v", plain, err)
	}
}

func TestDecrypt_FallsBackToThePreviousKeyAndRefusesAWrongOne(t *testing.T) {
	rotated := bytes.Repeat([]byte{'B'}, KeySize)
	ct := strings.TrimPrefix(raleighUnderTestKey, EncryptedPrefix)
	if got, err := (Decryption{Key: rotated, PreviousKey: testKey, IV: testIV}).Decrypt(ct); err != nil || got != "Raleigh" {
		t.Errorf("with the old key as previousKey: %q, %v; want Raleigh", got, err)
	}
	if _, err := (Decryption{Key: rotated, IV: testIV}).Decrypt(ct); !errors.Is(err, ErrDecrypt) {
		t.Errorf("with only a wrong key: %v, want ErrDecrypt", err)
	}
	if _, err := (Decryption{Key: testKey, IV: testIV}).Decrypt("not base64!"); !errors.Is(err, ErrDecrypt) {
		t.Errorf("garbage: %v, want ErrDecrypt", err)
	}
}

func TestDecryptJSON_ReplacesEveryValueEscapedForJSON(t *testing.T) {
	enc := Encryption{Key: testKey, IV: testIV}
	multi, _ := enc.Encrypt("line \"one\"\nline two")
	in := `{"data":{"a":"` + raleighUnderTestKey + `","b":"` + multi + `","c":"plain"}}`
	out, err := Decryption{Key: testKey, IV: testIV}.DecryptJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"data":{"a":"Raleigh","b":"line \"one\"\nline two","c":"plain"}}`
	if string(out) != want {
		t.Errorf("DecryptJSON = %s, want %s", out, want)
	}
}

func TestUsesEncryption(t *testing.T) {
	for text, want := range map[string]bool{
		`{{hub fromSecret "ns" "s" "k" hub}}`:            true,
		`{{hub copySecretData "ns" "s" hub}}`:            true,
		`{{hub "x" | protect hub}}`:                      true,
		`{{hub fromConfigMap "ns" "c" "k" hub}}`:         false,
		`{{ fromSecret "ns" "s" "k" }}`:                  false,
		`{{hub .ManagedClusterName hub}} fromSecret`:     false,
		"{{hub fromConfigMap \"ns\" \"c\" \"k\"\n hub}}": false,
	} {
		if got := UsesEncryption([]byte(text)); got != want {
			t.Errorf("UsesEncryption(%q) = %v, want %v", text, got, want)
		}
	}
}

// Hub templates with Protect set encrypt what fromSecret and copySecretData read (the stored,
// base64 value) and what is piped into protect; nothing of the Secret remains in clear.
func TestHubTemplates_SecretValuesLeaveOnlyEncrypted(t *testing.T) {
	secret := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Secret",
		"metadata": map[string]any{"namespace": "ns", "name": "s"}, "data": map[string]any{"pw": "czNjcmV0"}}}
	enc := Encryption{Key: testKey, IV: testIV}
	cfg := Config{Hub: true, Namespace: "ns", Reader: objects{"Secret/ns/s": secret}, Protect: enc.Encrypt}
	in := `{"data":{"one":"{{hub fromSecret \"ns\" \"s\" \"pw\" hub}}","p":"{{hub \"Raleigh\" | protect hub}}"},` +
		`"copy":"{{hub copySecretData \"ns\" \"s\" hub}}"}`
	out, err := ResolveJSON(context.Background(), []byte(in), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(out, []byte("czNjcmV0")) || bytes.Contains(out, []byte("Raleigh")) {
		t.Fatalf("plaintext left in %s", out)
	}
	plain, err := Decryption{Key: testKey, IV: testIV}.DecryptJSON(out)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"copy":{"pw":"czNjcmV0"},"data":{"one":"czNjcmV0","p":"Raleigh"}}`
	if string(plain) != want {
		t.Errorf("decrypted %s, want %s", plain, want)
	}
}
