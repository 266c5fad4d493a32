package admissionpolicy

import (
	"testing"

	"regent.dev/regent/policyserver/lifecycle/signing"
)

// TestSigningSecret_ThePolicyServerSignsAndVerifiesWithIt holds the contract with the policy
// server: the data the controller writes is what its leader signs with and its replicas verify.
func TestSigningSecret_ThePolicyServerSignsAndVerifiesWithIt(t *testing.T) {
	ca, err := newCA("default", now)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := newSigner("default", ca, now)
	if err != nil {
		t.Fatal(err)
	}
	data := map[string][]byte{caCertKey: ca.cert, signerCertKey: signer.cert, signerKeyKey: signer.key}
	s, err := signing.NewSigner(data)
	if err != nil {
		t.Fatalf("the leader cannot load the signing Secret: %v", err)
	}
	v, err := signing.NewVerifier(data, now)
	if err != nil {
		t.Fatalf("a replica cannot load the signing Secret: %v", err)
	}
	sig, err := s.Sign([]byte("module"))
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Verify([]byte("module"), sig); err != nil {
		t.Errorf("signature does not verify: %v", err)
	}
	if err := v.Verify([]byte("tampered"), sig); err == nil {
		t.Errorf("a tampered file verified")
	}
	if signing.SecretName("default") != signingSecretName("default") {
		t.Errorf("Secret names differ: %s vs %s", signing.SecretName("default"), signingSecretName("default"))
	}
}
