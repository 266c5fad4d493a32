package capabilities

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	clocktesting "k8s.io/utils/clock/testing"

	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/signatures"
	"regent.dev/regent/policyserver/signatures/signaturestest"
)

// A policy asks whether an image is signed with given keys, as Kubewarden's SDKs do through
// oci/v1/verify and oci/v2/verify, and gets {is_trusted, digest} or an error saying why not.
func TestOCI_Verify_PubKeys_AnswersAsKubewardensSDKsExpect(t *testing.T) {
	reg := startRegistry(t, false)
	digest := reg.push(t, "app:v1")
	d, err := name.NewDigest(reg.host + "/app@" + digest)
	if err != nil {
		t.Fatal(err)
	}
	alice, bob := signaturestest.NewKey(t), signaturestest.NewKey(t)
	signaturestest.Sign(t, d, alice, map[string]string{"env": "prod"})
	h, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	image := reg.host + "/app:v1"
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	for _, tc := range []struct {
		name, op, payload, refusal string
	}{
		{"V2_KeyAndAnnotations_Trusted", "v2/verify",
			`{"type":"SigstorePubKeyVerify","image":` + quote(image) + `,"pub_keys":[` + quote(alice.PublicPEM) + `],"annotations":{"env":"prod"}}`, ""},
		{"V1_ExternallyTagged_AnnotationsAsList_Trusted", "v1/verify",
			`{"SigstorePubKeyVerify":{"image":` + quote(image) + `,"pub_keys":[` + quote(alice.PublicPEM) + `],"annotations":[{"key":"env","value":"prod"}]}}`, ""},
		{"V2_NoAnnotations_Trusted", "v2/verify",
			`{"type":"SigstorePubKeyVerify","image":` + quote(image) + `,"pub_keys":[` + quote(alice.PublicPEM) + `],"annotations":null}`, ""},
		{"V2_AnotherKey_Refused", "v2/verify",
			`{"type":"SigstorePubKeyVerify","image":` + quote(image) + `,"pub_keys":[` + quote(bob.PublicPEM) + `]}`, "no signature is made with its key"},
		{"V2_EveryKeyMustHaveSigned_Refused", "v2/verify",
			`{"type":"SigstorePubKeyVerify","image":` + quote(image) + `,"pub_keys":[` + quote(alice.PublicPEM) + `,` + quote(bob.PublicPEM) + `]}`, "allOf[1]"},
		{"V1_OtherAnnotation_Refused", "v1/verify",
			`{"SigstorePubKeyVerify":{"image":` + quote(image) + `,"pub_keys":[` + quote(alice.PublicPEM) + `],"annotations":{"env":"dev"}}}`, "lacks the annotations env=dev"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := h.Call(context.Background(), engine.HostCall{Binding: "kubewarden", Namespace: "oci", Operation: tc.op, Payload: []byte(tc.payload)})
			if tc.refusal != "" {
				if !errors.Is(err, signatures.ErrUntrusted) || !strings.Contains(err.Error(), tc.refusal) || !strings.Contains(err.Error(), image) {
					t.Fatalf("got %s, %v; want an untrusted error naming the image and saying %q", out, err, tc.refusal)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				IsTrusted *bool  `json:"is_trusted"`
				Digest    string `json:"digest"`
			}
			if err := json.Unmarshal(out, &got); err != nil || got.IsTrusted == nil || !*got.IsTrusted || got.Digest != digest {
				t.Fatalf("answer %s (%v), want is_trusted true and digest %s", out, err, digest)
			}
		})
	}
}

// Keyless, GitHub Actions and certificate requests answer as Kubewarden's do, checked against
// the policy server's Sigstore trust root.
func TestOCI_Verify_Keyless_AnswersAsKubewardensSDKsExpect(t *testing.T) {
	reg := startRegistry(t, false)
	digest := reg.push(t, "keyless:v1")
	d, err := name.NewDigest(reg.host + "/keyless@" + digest)
	if err != nil {
		t.Fatal(err)
	}
	sigstore := signaturestest.NewSigstore(t)
	sigstore.SignKeyless(t, d, signaturestest.Identity{Issuer: "https://oidc.regent.test", Subject: "alice@regent.test"},
		signaturestest.Keyless{Annotations: map[string]string{"env": "prod"}})
	sigstore.SignKeyless(t, d, signaturestest.GitHubWorkflow("kubewarden/policies"), signaturestest.Keyless{})
	certPEM, certKey := sigstore.CodeSigningCertificate(t, "release@regent.test")
	sigstore.SignWithCertificate(t, d, certPEM, certKey, true)
	unloggedDigest := reg.push(t, "unlogged:v1")
	unlogged, err := name.NewDigest(reg.host + "/unlogged@" + unloggedDigest)
	if err != nil {
		t.Fatal(err)
	}
	sigstore.SignWithCertificate(t, unlogged, certPEM, certKey, false)
	otherPEM, _ := signaturestest.NewSigstore(t).CodeSigningCertificate(t, "release@regent.test")

	h, err := New(Options{Sigstore: sigstore.TrustRoot(t), Clock: clocktesting.NewFakePassiveClock(signaturestest.SignedAt)})
	if err != nil {
		t.Fatal(err)
	}
	untrusting, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	image, unloggedImage := reg.host+"/keyless:v1", reg.host+"/unlogged:v1"
	quote := func(s string) string { b, _ := json.Marshal(s); return string(b) }
	runes := func(b []byte) string { // as the Go SDK sends PEM: the code points, as numbers
		out, _ := json.Marshal([]rune(string(b)))
		return string(out)
	}
	for _, tc := range []struct {
		name, op, payload string
		host              *Host
		digest, refusal   string
	}{
		{"V2_Keyless_Exact_Trusted", "v2/verify",
			`{"type":"SigstoreKeylessVerify","image":` + quote(image) + `,"keyless":[{"issuer":"https://oidc.regent.test","subject":"alice@regent.test"}],"annotations":{"env":"prod"}}`, h, digest, ""},
		{"V1_Keyless_Exact_Trusted", "v1/verify",
			`{"SigstoreKeylessVerify":{"image":` + quote(image) + `,"keyless":[{"issuer":"https://oidc.regent.test","subject":"alice@regent.test"}],"annotations":null}}`, h, digest, ""},
		{"V2_Keyless_AnotherSubject_Refused", "v2/verify",
			`{"type":"SigstoreKeylessVerify","image":` + quote(image) + `,"keyless":[{"issuer":"https://oidc.regent.test","subject":"bob@regent.test"}]}`, h, "", "another subject"},
		{"V2_Keyless_EveryIdentityMustHaveSigned_Refused", "v2/verify",
			`{"type":"SigstoreKeylessVerify","image":` + quote(image) + `,"keyless":[{"issuer":"https://oidc.regent.test","subject":"alice@regent.test"},{"issuer":"https://oidc.regent.test","subject":"bob@regent.test"}]}`, h, "", "allOf[1]"},
		{"V2_KeylessPrefix_Trusted", "v2/verify",
			`{"type":"SigstoreKeylessPrefixVerify","image":` + quote(image) + `,"keyless_prefix":[{"issuer":"https://token.actions.githubusercontent.com","url_prefix":"https://github.com/kubewarden"}]}`, h, digest, ""},
		{"V2_KeylessPrefix_OtherOrganisation_Refused", "v2/verify",
			`{"type":"SigstoreKeylessPrefixVerify","image":` + quote(image) + `,"keyless_prefix":[{"issuer":"https://token.actions.githubusercontent.com","url_prefix":"https://github.com/kube"}]}`, h, "", "not under https://github.com/kube/"},
		{"V2_GithubActions_OwnerAndRepo_Trusted", "v2/verify",
			`{"type":"SigstoreGithubActionsVerify","image":` + quote(image) + `,"owner":"kubewarden","repo":"policies"}`, h, digest, ""},
		{"V2_GithubActions_OwnerOnly_Trusted", "v2/verify",
			`{"type":"SigstoreGithubActionsVerify","image":` + quote(image) + `,"owner":"kubewarden","repo":null}`, h, digest, ""},
		{"V2_GithubActions_AnotherOwner_Refused", "v2/verify",
			`{"type":"SigstoreGithubActionsVerify","image":` + quote(image) + `,"owner":"octocat"}`, h, "", "another owner"},
		{"V2_Certificate_ChainedAndLogged_Trusted", "v2/verify",
			`{"type":"SigstoreCertificateVerify","image":` + quote(image) + `,"certificate":` + runes(certPEM) + `,"certificate_chain":[` + runes(sigstore.CAPEM()) + `],"require_rekor_bundle":true}`, h, digest, ""},
		{"V2_Certificate_NoChain_TrustedAsGiven", "v2/verify",
			`{"type":"SigstoreCertificateVerify","image":` + quote(unloggedImage) + `,"certificate":` + runes(certPEM) + `,"certificate_chain":null,"require_rekor_bundle":false}`, h, unloggedDigest, ""},
		{"V2_Certificate_BundleRequired_NotLogged_Refused", "v2/verify",
			`{"type":"SigstoreCertificateVerify","image":` + quote(unloggedImage) + `,"certificate":` + runes(certPEM) + `,"require_rekor_bundle":true}`, h, "", "has no Rekor bundle, and one is required"},
		{"V2_Certificate_AnotherCertificate_Refused", "v2/verify",
			`{"type":"SigstoreCertificateVerify","image":` + quote(image) + `,"certificate":` + runes(otherPEM) + `,"require_rekor_bundle":false}`, h, "", "no signature is made with the certificate's key"},
		{"V2_Keyless_WithoutATrustRoot_RefusedSayingSo", "v2/verify",
			`{"type":"SigstoreKeylessVerify","image":` + quote(image) + `,"keyless":[{"issuer":"https://oidc.regent.test","subject":"alice@regent.test"}]}`, untrusting, "", "sigstoreTrustConfig"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := tc.host.Call(context.Background(), engine.HostCall{Binding: "kubewarden", Namespace: "oci", Operation: tc.op, Payload: []byte(tc.payload)})
			if tc.refusal != "" {
				if err == nil || !strings.Contains(err.Error(), tc.refusal) {
					t.Fatalf("got %s, %v; want an error saying %q", out, err, tc.refusal)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				IsTrusted *bool  `json:"is_trusted"`
				Digest    string `json:"digest"`
			}
			if err := json.Unmarshal(out, &got); err != nil || got.IsTrusted == nil || !*got.IsTrusted || got.Digest != tc.digest {
				t.Fatalf("answer %s (%v), want is_trusted true and digest %s", out, err, tc.digest)
			}
		})
	}
}

// A certificate that does not chain to the chain a policy gives is refused before any registry
// is asked.
func TestOCI_Verify_Certificate_NotChainingToTheGivenChain_IsRefused(t *testing.T) {
	sigstore, other := signaturestest.NewSigstore(t), signaturestest.NewSigstore(t)
	certPEM, _ := sigstore.CodeSigningCertificate(t, "release@regent.test")
	h, err := New(Options{Clock: clocktesting.NewFakePassiveClock(signaturestest.SignedAt)})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := json.Marshal(map[string]any{"type": "SigstoreCertificateVerify", "image": "registry.invalid/x:v1",
		"certificate": string(certPEM), "certificate_chain": []string{string(other.CAPEM())}, "require_rekor_bundle": false})
	_, err = h.Call(context.Background(), engine.HostCall{Binding: "kubewarden", Namespace: "oci", Operation: "v2/verify", Payload: req})
	if err == nil || !strings.Contains(err.Error(), "does not chain to the certificate_chain given") {
		t.Fatalf("got %v, want a refusal saying the certificate does not chain", err)
	}
}
