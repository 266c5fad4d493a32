package signatures_test

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/random"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"regent.dev/regent/policyserver/signatures"
	"regent.dev/regent/policyserver/signatures/signaturestest"
)

// pushArtifact stores a random artifact under repo and returns its digest reference.
func pushArtifact(t *testing.T, host, repo string) name.Digest {
	t.Helper()
	img, err := random.Image(64, 1)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(host + "/" + repo + ":v1")
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img); err != nil {
		t.Fatal(err)
	}
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return tag.Context().Digest(d.String())
}

func newRegistry(t *testing.T) string {
	s := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

func pubKeyConfig(t *testing.T, body string) *signatures.Config {
	t.Helper()
	c, err := signatures.Parse([]byte(body), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func indent(pem string) string {
	return "      " + strings.ReplaceAll(strings.TrimSpace(pem), "\n", "\n      ")
}

func TestVerify_PubKeyRequirements(t *testing.T) {
	host := newRegistry(t)
	alice, bob, mallory := signaturestest.NewKey(t), signaturestest.NewKey(t), signaturestest.NewKey(t)
	aliceOnly := "apiVersion: v1\nallOf:\n  - kind: pubKey\n    owner: alice\n    key: |\n" + indent(alice.PublicPEM) + "\n"
	aliceProd := aliceOnly + "    annotations:\n      env: prod\n"
	twoOf := "apiVersion: v1\nanyOf:\n  minimumMatches: 2\n  signatures:\n  - kind: pubKey\n    key: |\n" + indent(alice.PublicPEM) +
		"\n  - kind: pubKey\n    key: |\n" + indent(bob.PublicPEM) + "\n  - kind: pubKey\n    key: |\n" + indent(mallory.PublicPEM) + "\n"

	cases := []struct {
		name    string
		config  string
		sign    func(d name.Digest)
		trusted bool
		says    string
	}{
		{"SignedWithTheKey_IsTrusted", aliceOnly, func(d name.Digest) { signaturestest.Sign(t, d, alice, nil) }, true, ""},
		{"Unsigned_IsRefused", aliceOnly, func(name.Digest) {}, false, "has no cosign signature"},
		{"SignedWithAnotherKey_IsRefused", aliceOnly, func(d name.Digest) { signaturestest.Sign(t, d, mallory, nil) }, false, "no signature is made with its key"},
		{"AnotherArtifactsPayload_IsRefused", aliceOnly, func(d name.Digest) {
			other := d.Context().Digest("sha256:" + strings.Repeat("ab", 32))
			body, _ := (payloadFor(other)).MarshalJSON()
			signaturestest.SignPayload(t, d, alice, body)
		}, false, "not this artifact"},
		{"AnnotationsRequired_Present_IsTrusted", aliceProd, func(d name.Digest) {
			signaturestest.Sign(t, d, alice, map[string]string{"env": "prod", "team": "a"})
		}, true, ""},
		{"AnnotationsRequired_Different_IsRefused", aliceProd, func(d name.Digest) {
			signaturestest.Sign(t, d, alice, map[string]string{"env": "dev"})
		}, false, "lacks the annotations env=prod"},
		{"AnyOf_TwoOfThreeMet_IsTrusted", twoOf, func(d name.Digest) {
			signaturestest.Sign(t, d, alice, nil)
			signaturestest.Sign(t, d, bob, nil)
		}, true, ""},
		{"AnyOf_OneOfTwoRequired_IsRefused", twoOf, func(d name.Digest) { signaturestest.Sign(t, d, bob, nil) }, false, "1 of 2 required signatures met"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := pushArtifact(t, host, "policies/p"+string(rune('a'+i)))
			tc.sign(d)
			err := pubKeyConfig(t, tc.config).Verify(context.Background(), d)
			if tc.trusted {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, signatures.ErrUntrusted) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want an ErrUntrusted saying %q", err, tc.says)
			}
		})
	}
}

func TestParse_RefusesWhatItCannotCheck(t *testing.T) {
	key := signaturestest.NewKey(t)
	for name, tc := range map[string]struct{ config, says string }{
		"KeylessWithoutTrustRoot":      {"apiVersion: v1\nallOf:\n  - kind: genericIssuer\n    issuer: https://accounts.example\n    subject:\n      equal: a@example.com\n", "sigstoreTrustConfig"},
		"GitHubActionWithoutTrustRoot": {"apiVersion: v1\nanyOf:\n  signatures:\n  - kind: githubAction\n    owner: kubewarden\n", "sigstoreTrustConfig"},
		"NoRequirement":                {"apiVersion: v1\n", "every module would be trusted"},
		"UnknownKind":                  {"apiVersion: v1\nallOf:\n  - kind: pgp\n", "unknown kind"},
		"BadKey":                       {"apiVersion: v1\nallOf:\n  - kind: pubKey\n    key: not a key\n", "pubKey"},
		"UnknownField":                 {"apiVersion: v1\nrequirements:\n  - kind: pubKey\n", "unknown field"},
		"TooManyMatches":               {"apiVersion: v1\nanyOf:\n  minimumMatches: 2\n  signatures:\n  - kind: pubKey\n    key: |\n" + indent(key.PublicPEM) + "\n", "more than the 1 signatures"},
		"WrongAPIVersion":              {"apiVersion: v2\nallOf:\n  - kind: pubKey\n    key: |\n" + indent(key.PublicPEM) + "\n", "apiVersion"},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := signatures.Parse([]byte(tc.config), nil); err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want an error saying %q", err, tc.says)
			}
		})
	}
}

// A configuration that cannot be read trusts nothing, and every refusal says why.
func TestBroken_TrustsNothing_AndSaysWhy(t *testing.T) {
	host := newRegistry(t)
	key := signaturestest.NewKey(t)
	d := pushArtifact(t, host, "policies/any")
	signaturestest.Sign(t, d, key, nil)
	_, perr := signatures.Parse([]byte("apiVersion: v1\nallOf:\n  - kind: githubAction\n    owner: kubewarden\n"), nil)
	err := signatures.Broken(perr).Verify(context.Background(), d)
	if !errors.Is(err, signatures.ErrUntrusted) || !strings.Contains(err.Error(), "sigstoreTrustConfig") {
		t.Fatalf("got %v, want ErrUntrusted saying a keyless requirement needs a sigstoreTrustConfig", err)
	}
}
