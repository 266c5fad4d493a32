package capabilities

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"

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
