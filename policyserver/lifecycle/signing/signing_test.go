package signing

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestSigning_SignedFileVerifies_TamperedOrUnsignedIsRefused(t *testing.T) {
	data, err := NewSecretData("default", time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSigner(data)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewVerifier(data, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	f := filepath.Join(dir, "code")
	if err := os.WriteFile(f, []byte("machine code"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := s.SignFile(f); err != nil {
		t.Fatal(err)
	}
	if b, err := v.ReadVerified(f); err != nil || string(b) != "machine code" {
		t.Fatalf("signed file: %q, %v", b, err)
	}
	if err := os.WriteFile(f, []byte("machine codf"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := v.ReadVerified(f); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("tampered file: want ErrBadSignature, got %v", err)
	}
	_ = os.Remove(f + SignatureSuffix)
	if _, err := v.ReadVerified(f); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("unsigned file: want ErrBadSignature, got %v", err)
	}
}

func TestSigning_SignerFromAnotherCA_IsNotTrusted(t *testing.T) {
	a, _ := NewSecretData("a", time.Now(), time.Hour)
	b, _ := NewSecretData("b", time.Now(), time.Hour)
	mixed := map[string][]byte{CAKey: a[CAKey], CertKey: b[CertKey]}
	if _, err := NewVerifier(mixed, time.Now()); err == nil {
		t.Fatal("a signer certificate from another CA was trusted")
	}
	if _, err := NewVerifier(a, time.Now().Add(2*time.Hour)); err == nil {
		t.Fatal("an expired signer certificate was trusted")
	}
}
