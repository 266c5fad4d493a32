package signatures_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"

	"regent.dev/regent/policyserver/signatures"
	"regent.dev/regent/policyserver/signatures/signaturestest"
)

const (
	oidc   = "https://oidc.regent.test"
	alice  = "alice@regent.test"
	ciRepo = "https://git.regent.test/platform/policies/"
)

func genericIssuer(issuer, subjectKey, subject string) string {
	return "  - kind: genericIssuer\n    issuer: " + issuer + "\n    subject:\n      " + subjectKey + ": " + subject + "\n"
}

func githubAction(owner, repo string) string {
	r := "  - kind: githubAction\n    owner: " + owner + "\n"
	if repo != "" {
		r += "    repo: " + repo + "\n"
	}
	return r
}

// Keyless requirements are met by cosign keyless signatures whose Fulcio certificate names the
// identity, chains to the trust root's CA at signing time, and whose Rekor bundle verifies and
// falls inside the certificate's ten minutes; anything short of that is refused, saying what.
func TestVerify_KeylessRequirements(t *testing.T) {
	host := newRegistry(t)
	sigstore, rogue := signaturestest.NewSigstore(t), signaturestest.NewSigstore(t)
	trust := sigstore.TrustRoot(t)
	allOf := func(reqs ...string) string { return "apiVersion: v1\nallOf:\n" + strings.Join(reqs, "") }
	aliceEqual := allOf(genericIssuer(oidc, "equal", alice))
	byAlice := signaturestest.Identity{Issuer: oidc, Subject: alice}
	key := signaturestest.NewKey(t)

	cases := []struct {
		name    string
		config  string
		sign    func(d name.Digest)
		trusted bool
		says    string
	}{
		{"GenericIssuer_Equal_IsTrusted", aliceEqual, func(d name.Digest) { sigstore.SignKeyless(t, d, byAlice, signaturestest.Keyless{}) }, true, ""},
		{"GenericIssuer_AnotherIssuer_IsRefused", aliceEqual, func(d name.Digest) {
			sigstore.SignKeyless(t, d, signaturestest.Identity{Issuer: "https://accounts.example", Subject: alice}, signaturestest.Keyless{})
		}, false, "alice@regent.test (issuer https://accounts.example), from another issuer"},
		{"GenericIssuer_AnotherSubject_IsRefused", aliceEqual, func(d name.Digest) {
			sigstore.SignKeyless(t, d, signaturestest.Identity{Issuer: oidc, Subject: "mallory@regent.test"}, signaturestest.Keyless{})
		}, false, "mallory@regent.test (issuer https://oidc.regent.test), another subject"},
		{"GenericIssuer_URLPrefix_SubjectUnderIt_IsTrusted", allOf(genericIssuer(oidc, "urlPrefix", strings.TrimSuffix(ciRepo, "/"))), func(d name.Digest) {
			sigstore.SignKeyless(t, d, signaturestest.Identity{Issuer: oidc, Subject: ciRepo + "release.yml@refs/heads/main"}, signaturestest.Keyless{})
		}, true, ""},
		{"GenericIssuer_URLPrefix_IsAPath_NotAStringPrefix", allOf(genericIssuer(oidc, "urlPrefix", strings.TrimSuffix(ciRepo, "/"))), func(d name.Digest) {
			sigstore.SignKeyless(t, d, signaturestest.Identity{Issuer: oidc, Subject: strings.TrimSuffix(ciRepo, "/") + "-fork/release.yml"}, signaturestest.Keyless{})
		}, false, "a subject not under https://git.regent.test/platform/policies/"},
		{"GitHubAction_Owner_IsTrusted", allOf(githubAction("kubewarden", "")), func(d name.Digest) {
			sigstore.SignKeyless(t, d, signaturestest.GitHubWorkflow("kubewarden/policies"), signaturestest.Keyless{})
		}, true, ""},
		{"GitHubAction_OwnerAndRepo_IsTrusted", allOf(githubAction("kubewarden", "policies")), func(d name.Digest) {
			sigstore.SignKeyless(t, d, signaturestest.GitHubWorkflow("kubewarden/policies"), signaturestest.Keyless{})
		}, true, ""},
		{"GitHubAction_AnotherRepo_IsRefused", allOf(githubAction("kubewarden", "policies")), func(d name.Digest) {
			sigstore.SignKeyless(t, d, signaturestest.GitHubWorkflow("kubewarden/sandbox"), signaturestest.Keyless{})
		}, false, "a workflow of kubewarden/sandbox, another repository"},
		{"GitHubAction_AnotherOwner_IsRefused", allOf(githubAction("kubewarden", "")), func(d name.Digest) {
			sigstore.SignKeyless(t, d, signaturestest.GitHubWorkflow("kubewarden-fork/policies"), signaturestest.Keyless{})
		}, false, "a workflow of kubewarden-fork/policies, another owner"},
		{"GitHubAction_NotFromGitHubActions_IsRefused", allOf(githubAction("kubewarden", "")), func(d name.Digest) {
			id := signaturestest.GitHubWorkflow("kubewarden/policies")
			id.Issuer = oidc
			sigstore.SignKeyless(t, d, id, signaturestest.Keyless{})
		}, false, "not a GitHub Actions workflow"},
		{"Annotations_Required_Present_IsTrusted", allOf(genericIssuer(oidc, "equal", alice) + "    annotations:\n      env: prod\n"), func(d name.Digest) {
			sigstore.SignKeyless(t, d, byAlice, signaturestest.Keyless{Annotations: map[string]string{"env": "prod"}})
		}, true, ""},
		{"Annotations_Required_Missing_IsRefused", allOf(genericIssuer(oidc, "equal", alice) + "    annotations:\n      env: prod\n"), func(d name.Digest) {
			sigstore.SignKeyless(t, d, byAlice, signaturestest.Keyless{})
		}, false, "lacks the annotations env=prod"},
		{"CertificateExpiredAtSigning_IsRefused", aliceEqual, func(d name.Digest) {
			sigstore.SignKeyless(t, d, byAlice, signaturestest.Keyless{CertificateFrom: signaturestest.SignedAt.Add(-20 * time.Minute)})
		}, false, "was made at 2026-03-01T12:00:00Z, outside its certificate's validity (2026-03-01T11:40:00Z to 2026-03-01T11:50:00Z)"},
		{"CertificateNotYetValidAtSigning_IsRefused", aliceEqual, func(d name.Digest) {
			sigstore.SignKeyless(t, d, byAlice, signaturestest.Keyless{CertificateFrom: signaturestest.SignedAt.Add(time.Minute)})
		}, false, "outside its certificate's validity"},
		{"CertificateFromAnUntrustedCA_IsRefused", aliceEqual, func(d name.Digest) {
			sigstore.SignKeyless(t, d, byAlice, signaturestest.Keyless{IssuedBy: rogue})
		}, false, "does not chain to a Fulcio CA of the trust root"},
		{"TamperedSignedEntryTimestamp_IsRefused", aliceEqual, func(d name.Digest) {
			sigstore.SignKeyless(t, d, byAlice, signaturestest.Keyless{TamperSET: true})
		}, false, "SignedEntryTimestamp does not verify"},
		{"LoggedByAnUntrustedLog_IsRefused", aliceEqual, func(d name.Digest) {
			rogue.SignKeyless(t, d, byAlice, signaturestest.Keyless{IssuedBy: sigstore})
		}, false, "which the trust root does not list"},
		{"NoRekorBundle_IsRefused", aliceEqual, func(d name.Digest) {
			sigstore.SignKeyless(t, d, byAlice, signaturestest.Keyless{NoBundle: true})
		}, false, "has no Rekor bundle"},
		{"KeyBasedSignatureOnly_IsRefused", aliceEqual, func(d name.Digest) { signaturestest.Sign(t, d, key, nil) }, false, "no signature is keyless"},
		{"AnyOf_KeylessOrKey_KeylessMet_IsTrusted",
			"apiVersion: v1\nanyOf:\n  signatures:\n" + genericIssuer(oidc, "equal", alice) + "  - kind: pubKey\n    key: |\n" + indent(key.PublicPEM) + "\n",
			func(d name.Digest) { sigstore.SignKeyless(t, d, byAlice, signaturestest.Keyless{}) }, true, ""},
		{"AllOf_KeylessAndGitHub_OnlyOneMet_NamesTheUnmet", allOf(genericIssuer(oidc, "equal", alice), githubAction("kubewarden", "")), func(d name.Digest) {
			sigstore.SignKeyless(t, d, byAlice, signaturestest.Keyless{})
		}, false, "allOf[1] (githubAction of kubewarden): a keyless signature is by alice@regent.test (issuer https://oidc.regent.test), not a GitHub Actions workflow"},
		// The closest signature explains the refusal: here the one by alice, whose certificate
		// is out of date, rather than mallory's.
		{"SeveralSignatures_TheClosestExplains", aliceEqual, func(d name.Digest) {
			sigstore.SignKeyless(t, d, signaturestest.Identity{Issuer: oidc, Subject: "mallory@regent.test"}, signaturestest.Keyless{})
			sigstore.SignKeyless(t, d, byAlice, signaturestest.Keyless{CertificateFrom: signaturestest.SignedAt.Add(-time.Hour)})
		}, false, "outside its certificate's validity"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := pushArtifact(t, host, "keyless/p"+string(rune('a'+i)))
			tc.sign(d)
			c, err := signatures.Parse([]byte(tc.config), trust)
			if err != nil {
				t.Fatal(err)
			}
			err = c.Verify(context.Background(), d)
			if tc.trusted {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if !errors.Is(err, signatures.ErrUntrusted) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v\nwant an ErrUntrusted saying %q", err, tc.says)
			}
		})
	}
}

// A bundle lends a signature its time only when it logs that very signature: one copied from
// another signature of the same signer does not.
func TestVerify_Keyless_BundleOfAnotherSignature_IsRefused(t *testing.T) {
	host := newRegistry(t)
	sigstore := signaturestest.NewSigstore(t)
	byAlice := signaturestest.Identity{Issuer: oidc, Subject: alice}
	d := pushArtifact(t, host, "keyless/replay")
	sigstore.SignKeyless(t, d, byAlice, signaturestest.Keyless{})
	sigstore.SignKeyless(t, d, byAlice, signaturestest.Keyless{NoBundle: true})
	sigs, err := signatures.Fetch(context.Background(), d)
	if err != nil || len(sigs) != 2 {
		t.Fatalf("fetch: %d signatures, %v", len(sigs), err)
	}
	c, err := signatures.Parse([]byte("apiVersion: v1\nallOf:\n"+genericIssuer(oidc, "equal", alice)), sigstore.TrustRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Check(d.DigestStr(), sigs); err != nil {
		t.Fatalf("the logged signature alone is refused: %v", err)
	}
	sigs[1].Bundle = sigs[0].Bundle
	if err := c.Check(d.DigestStr(), sigs[1:]); !errors.Is(err, signatures.ErrUntrusted) || !strings.Contains(err.Error(), "Rekor bundle is not of this signature") {
		t.Fatalf("got %v, want the borrowed bundle refused", err)
	}
}

func TestParse_KeylessRequirements(t *testing.T) {
	trust := signaturestest.NewSigstore(t).TrustRoot(t)
	for name, tc := range map[string]struct{ config, says string }{
		"GenericIssuer_NoIssuer":       {"apiVersion: v1\nallOf:\n  - kind: genericIssuer\n    subject:\n      equal: a@b\n", "without an issuer"},
		"GenericIssuer_NoSubject":      {"apiVersion: v1\nallOf:\n  - kind: genericIssuer\n    issuer: " + oidc + "\n", "exactly one of equal and urlPrefix"},
		"GenericIssuer_BothSubjects":   {"apiVersion: v1\nallOf:\n  - kind: genericIssuer\n    issuer: " + oidc + "\n    subject:\n      equal: a@b\n      urlPrefix: https://x.test\n", "exactly one of equal and urlPrefix"},
		"GenericIssuer_PrefixNotAURL":  {"apiVersion: v1\nallOf:\n" + genericIssuer(oidc, "urlPrefix", "not-a-url"), "not an absolute URL"},
		"GenericIssuer_WithAKey":       {"apiVersion: v1\nallOf:\n" + genericIssuer(oidc, "equal", "a@b") + "    key: x\n", "has no key"},
		"GitHubAction_NoOwner":         {"apiVersion: v1\nallOf:\n  - kind: githubAction\n    repo: policies\n", "without an owner"},
		"GitHubAction_WithAnIssuer":    {"apiVersion: v1\nallOf:\n" + githubAction("kubewarden", "") + "    issuer: " + oidc + "\n", "genericIssuer's"},
		"GitHubAction_UnknownField":    {"apiVersion: v1\nallOf:\n" + githubAction("kubewarden", "") + "    workflow: release\n", "unknown field"},
		"Keyless_WithoutATrustRoot":    {"apiVersion: v1\nallOf:\n" + githubAction("kubewarden", ""), "sigstoreTrustConfig"},
		"Certificate_NotAConfigurable": {"apiVersion: v1\nallOf:\n  - kind: certificate\n", "unknown kind"},
	} {
		t.Run(name, func(t *testing.T) {
			tr := trust
			if name == "Keyless_WithoutATrustRoot" {
				tr = nil
			}
			_, err := signatures.Parse([]byte(tc.config), tr)
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want an error saying %q", err, tc.says)
			}
			if name == "Keyless_WithoutATrustRoot" && !errors.Is(err, signatures.ErrNoTrustRoot) {
				t.Fatalf("got %v, want ErrNoTrustRoot", err)
			}
		})
	}
}

// The trust root is another input of the verification: the same configuration against another
// root is another fingerprint, so modules verified against the old root are verified again.
func TestParse_Fingerprint_ChangesWithTheTrustRoot(t *testing.T) {
	config := []byte("apiVersion: v1\nallOf:\n" + genericIssuer(oidc, "equal", alice))
	one, err := signatures.Parse(config, signaturestest.NewSigstore(t).TrustRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	other, err := signatures.Parse(config, signaturestest.NewSigstore(t).TrustRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	if one.Fingerprint() == other.Fingerprint() {
		t.Fatalf("both trust roots give fingerprint %s", one.Fingerprint())
	}
}
