package lifecycle

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver/lifecycle/internal/sources"
	"regent.dev/regent/policyserver/signatures"
	"regent.dev/regent/policyserver/signatures/signaturestest"
)

// TestSignedModules: a PolicyServer with a verificationConfig serves a module only when its
// cosign signatures meet it, and says why on the revision when they do not.
func TestSignedModules(t *testing.T) {
	e := newEnv(t)
	t.Run("VerificationConfig_SignedModuleServes_UnsignedAndWronglySignedAreRefused", func(t *testing.T) { testSignedModules(t, e) })
	t.Run("ConfigAddedLater_ServedUnsignedModuleIsVerifiedAgain_AndNoLongerServed", func(t *testing.T) { testVerifiedAgain(t, e) })
	t.Run("Keyless_SignedByTheIdentityServes_OthersRefusedNamingTheUnmetRequirement", func(t *testing.T) { testKeylessModules(t, e) })
	t.Run("Keyless_WithoutATrustRoot_EveryModuleRefusedSayingSo", func(t *testing.T) { testKeylessWithoutTrustRoot(t, e) })
}

// releaseWorkflow is the verification config of the keyless tests: modules released by a
// workflow of platform/policies on the private Sigstore's CI.
const releaseWorkflow = "apiVersion: v1\nallOf:\n  - kind: genericIssuer\n    issuer: https://ci.regent.test\n" +
	"    subject:\n      urlPrefix: https://git.regent.test/platform/policies\n"

// testKeylessModules: with a sigstoreTrustConfig, a module signed keyless by the identity the
// verificationConfig names loads, and one signed by anyone else, or by a CA the trust root does
// not list, is refused with the requirement it does not meet.
func testKeylessModules(t *testing.T, e *env) {
	const ps = "keyless"
	shared := e.policyServer(t, ps)
	reg := sources.NewRegistry(t)
	sigstore, rogue := signaturestest.NewSigstore(t), signaturestest.NewSigstore(t)
	config, err := signatures.Parse([]byte(releaseWorkflow), sigstore.TrustRoot(t))
	if err != nil {
		t.Fatal(err)
	}
	r := e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1", Verification: config, SigstoreTrust: sigstore.TrustRoot(t)})

	release := signaturestest.Identity{Issuer: "https://ci.regent.test", Subject: "https://git.regent.test/platform/policies/.ci/release.yml@refs/tags/v1"}
	signed, d := pushRego(t, reg, "policies/released", "released")
	sigstore.SignKeyless(t, d, release, signaturestest.Keyless{})
	byAFork, d := pushRego(t, reg, "policies/fork", "fork")
	sigstore.SignKeyless(t, d, signaturestest.Identity{Issuer: "https://ci.regent.test", Subject: "https://git.regent.test/platform/policies-fork/.ci/release.yml@refs/tags/v1"}, signaturestest.Keyless{})
	byARogueCA, d := pushRego(t, reg, "policies/rogue", "rogue")
	sigstore.SignKeyless(t, d, release, signaturestest.Keyless{IssuedBy: rogue})

	good := e.createRevision(t, ps, "released", 1, regoSpec(signed))
	for _, tc := range []struct{ policy, module, says string }{
		{"fork", byAFork, "allOf[0] (genericIssuer https://ci.regent.test, subject under https://git.regent.test/platform/policies/): a keyless signature is by https://git.regent.test/platform/policies-fork/"},
		{"rogue", byARogueCA, "does not chain to a Fulcio CA of the trust root"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			rev := e.createRevision(t, ps, tc.policy, 1, regoSpec(tc.module))
			rev = e.waitRevision(t, rev.Name, "Initialized=UntrustedModule", initializedWith(metav1.ConditionFalse, ReasonUntrustedModule))
			if c := cond(rev, kubewardenv1.ConditionInitialized); !strings.Contains(c.Message, tc.says) {
				t.Errorf("message %q does not say %q", c.Message, tc.says)
			}
			if code, _ := r.review(t, "/validate/clusterwide-"+tc.policy+"/1", "nginx:latest"); code != http.StatusNotFound {
				t.Errorf("the untrusted policy answered %d, want 404", code)
			}
		})
	}

	rev := e.waitRevision(t, good.Name, "Ready", readyOn(0, ReasonLoaded))
	if rev.Status.VerifiedSignatures != config.Fingerprint() {
		t.Errorf("verifiedSignatures %q, want the config's %q", rev.Status.VerifiedSignatures, config.Fingerprint())
	}
	if c := cond(rev, kubewardenv1.ConditionInitialized); c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "signatures verified") {
		t.Errorf("Initialized does not say the signatures were verified: %+v", c)
	}
	if code, allowed := r.review(t, "/validate/clusterwide-released/1", "nginx:latest"); code != http.StatusOK || allowed {
		t.Errorf("the keyless-signed policy answered %d allowed=%v, want a denial", code, allowed)
	}
}

// testKeylessWithoutTrustRoot: a verificationConfig with keyless requirements and no
// sigstoreTrustConfig trusts no module, and every revision says what is missing.
func testKeylessWithoutTrustRoot(t *testing.T, e *env) {
	const ps = "keyless-untrusted"
	shared := e.policyServer(t, ps)
	reg := sources.NewRegistry(t)
	sigstore := signaturestest.NewSigstore(t)
	_, perr := signatures.Parse([]byte(releaseWorkflow), nil)
	if !errors.Is(perr, signatures.ErrNoTrustRoot) {
		t.Fatalf("parse without a trust root: %v, want ErrNoTrustRoot", perr)
	}
	e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1", Verification: signatures.Broken(perr)})
	signed, d := pushRego(t, reg, "policies/released", "released")
	sigstore.SignKeyless(t, d, signaturestest.Identity{Issuer: "https://ci.regent.test", Subject: "https://git.regent.test/platform/policies/.ci/release.yml@refs/tags/v1"}, signaturestest.Keyless{})
	rev := e.createRevision(t, ps, "released-without-trust", 1, regoSpec(signed))
	rev = e.waitRevision(t, rev.Name, "Initialized=UntrustedModule", initializedWith(metav1.ConditionFalse, ReasonUntrustedModule))
	if c := cond(rev, kubewardenv1.ConditionInitialized); !strings.Contains(c.Message, "sigstoreTrustConfig") {
		t.Errorf("message %q does not say a sigstoreTrustConfig is needed", c.Message)
	}
}

// pushRego pushes a Rego module as a registry artifact and returns its reference and digest.
func pushRego(t *testing.T, reg *sources.Registry, repo, variant string) (string, name.Digest) {
	t.Helper()
	ref := reg.Push(t, repo+".rego:v1", regoSource(t, variant))
	d, err := name.NewDigest(reg.Host + "/" + repo + ".rego@" + reg.Digest(t, repo+".rego:v1"))
	if err != nil {
		t.Fatal(err)
	}
	return ref, d
}

func trustAlice(t *testing.T, alice signaturestest.Key) *signatures.Config {
	t.Helper()
	c, err := signatures.Parse([]byte("apiVersion: v1\nallOf:\n  - kind: pubKey\n    owner: alice\n    key: |\n      "+
		strings.ReplaceAll(strings.TrimSpace(alice.PublicPEM), "\n", "\n      ")+"\n    annotations:\n      env: prod\n"), nil)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func testSignedModules(t *testing.T, e *env) {
	const ps = "signed"
	shared := e.policyServer(t, ps)
	reg := sources.NewRegistry(t)
	alice, mallory := signaturestest.NewKey(t), signaturestest.NewKey(t)
	config := trustAlice(t, alice)
	r := e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1", Verification: config})

	signed, d := pushRego(t, reg, "policies/signed", "signed")
	signaturestest.Sign(t, d, alice, map[string]string{"env": "prod"})
	wrongKey, d := pushRego(t, reg, "policies/wrong-key", "wrong-key")
	signaturestest.Sign(t, d, mallory, map[string]string{"env": "prod"})
	wrongAnnotation, d := pushRego(t, reg, "policies/dev", "dev")
	signaturestest.Sign(t, d, alice, map[string]string{"env": "dev"})
	unsigned, unsignedDigest := pushRego(t, reg, "policies/unsigned", "unsigned")

	good := e.createRevision(t, ps, "signed", 1, regoSpec(signed))
	for _, tc := range []struct{ policy, module, says string }{
		{"wrong-key", wrongKey, "no signature is made with its key"},
		{"wrong-annotation", wrongAnnotation, "lacks the annotations env=prod"},
		{"unsigned", unsigned, "has no cosign signature"},
		{"from-a-file", "file://" + writeFile(t, "p.rego", regoSource(t, "file")), "only registry:// modules carry signatures"},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			rev := e.createRevision(t, ps, tc.policy, 1, regoSpec(tc.module))
			rev = e.waitRevision(t, rev.Name, "Initialized=UntrustedModule", initializedWith(metav1.ConditionFalse, ReasonUntrustedModule))
			if c := cond(rev, kubewardenv1.ConditionInitialized); !strings.Contains(c.Message, tc.says) {
				t.Errorf("message %q does not say %q", c.Message, tc.says)
			}
			if c := report(rev, 0); c != nil {
				t.Errorf("an untrusted module was loaded: %+v", c)
			}
			if code, _ := r.review(t, "/validate/clusterwide-"+tc.policy+"/1", "nginx:latest"); code != http.StatusNotFound {
				t.Errorf("the untrusted policy answered %d, want 404", code)
			}
		})
	}

	rev := e.waitRevision(t, good.Name, "Ready", readyOn(0, ReasonLoaded))
	if rev.Status.VerifiedSignatures != config.Fingerprint() {
		t.Errorf("verifiedSignatures %q, want the config's %q", rev.Status.VerifiedSignatures, config.Fingerprint())
	}
	if c := cond(rev, kubewardenv1.ConditionInitialized); !strings.Contains(c.Message, "signatures verified") {
		t.Errorf("Initialized does not say the signatures were verified: %q", c.Message)
	}
	if code, allowed := r.review(t, "/validate/clusterwide-signed/1", "nginx:latest"); code != http.StatusOK || allowed {
		t.Errorf("the signed policy answered %d allowed=%v, want a denial", code, allowed)
	}

	// cosign sign often runs after the push: once the signature is there, the retry loads it.
	signaturestest.Sign(t, unsignedDigest, alice, map[string]string{"env": "prod"})
	e.waitRevision(t, "clusterwide-unsigned-g1", "Ready once signed", readyOn(0, ReasonLoaded))
}

// A module served before the PolicyServer had a verificationConfig is not served on trust once
// it has one: the leader verifies it again, and an unsigned one is refused and unloaded.
func testVerifiedAgain(t *testing.T, e *env) {
	const ps = "verified-again"
	shared := e.policyServer(t, ps)
	reg := sources.NewRegistry(t)
	unsigned, _ := pushRego(t, reg, "policies/old", "old")
	before := e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1"})
	rev := e.createRevision(t, ps, "old", 1, regoSpec(unsigned))
	e.waitRevision(t, rev.Name, "Ready without verification", readyOn(0, ReasonLoaded))
	before.kill(t)

	r := e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1",
		Verification: trustAlice(t, signaturestest.NewKey(t))})
	e.waitRevision(t, rev.Name, "Initialized=UntrustedModule", initializedWith(metav1.ConditionFalse, ReasonUntrustedModule))
	if code, _ := r.review(t, "/validate/clusterwide-old/1", "nginx:latest"); code != http.StatusNotFound {
		t.Errorf("the unverified policy answered %d, want 404", code)
	}
}
