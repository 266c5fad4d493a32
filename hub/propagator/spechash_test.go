package propagator

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	policyv1 "regent.dev/regent/api/policy/v1"
)

func specWithTemplate(raw string) *policyv1.PolicySpec {
	return &policyv1.PolicySpec{RemediationAction: policyv1.Enforce,
		PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: []byte(raw)}}}}
}

// A spec is hashed as the apiserver stores it, whether or not its encoding was seen before: key
// order and spacing in a template do not change the hash, any value does.
func TestSpecHash_SameForEqualSpecsOnlyAndAfterAMemoHit(t *testing.T) {
	sorted := `{"apiVersion":"v1","kind":"ConfigurationPolicy","spec":{"a":1,"b":[1.50,"x"]}}`
	reordered := "{ \"spec\": {\"b\": [1.50, \"x\"], \"a\": 1},\n \"kind\":\"ConfigurationPolicy\", \"apiVersion\":\"v1\"}"
	other := `{"apiVersion":"v1","kind":"ConfigurationPolicy","spec":{"a":2,"b":[1.50,"x"]}}`
	want := canonicalSpecHash(specWithTemplate(sorted))
	if want == "" {
		t.Fatal("no canonical hash")
	}
	for i := 0; i < 2; i++ { // the second round answers from canonicalHashes
		if got := SpecHash(specWithTemplate(sorted)); got != want {
			t.Errorf("round %d: sorted template: %s, want %s", i, got, want)
		}
		if got := SpecHash(specWithTemplate(reordered)); got != want {
			t.Errorf("round %d: reordered template: %s, want %s", i, got, want)
		}
		if got := SpecHash(specWithTemplate(other)); got == want || got == "" {
			t.Errorf("round %d: another value hashes as %q", i, got)
		}
	}
	enforce, inform := specWithTemplate(sorted), specWithTemplate(sorted)
	inform.RemediationAction = policyv1.Inform
	if SpecHash(enforce) == SpecHash(inform) {
		t.Error("enforce and inform specs share a hash")
	}
	if got := SpecHash(specWithTemplate(`{"unterminated":`)); got != "" {
		t.Errorf("a template that is not JSON hashes as %q", got)
	}
}

func TestCanonicalHashes_Bounded(t *testing.T) {
	t.Cleanup(func() { canonicalHashes.mu.Lock(); clear(canonicalHashes.m); canonicalHashes.mu.Unlock() })
	for i := 0; i < maxCanonicalHashes+10; i++ {
		canonicalHashes.put([32]byte{byte(i), byte(i >> 8), 1}, "h")
	}
	if n := len(canonicalHashes.m); n > maxCanonicalHashes {
		t.Errorf("%d entries, bound %d", n, maxCanonicalHashes)
	}
}

// BenchmarkSpecHash is the hash of a replica's spec as the hub's cache transform computes it for
// every replica its watch delivers; canonical is the same spec hashed without the memo.
func BenchmarkSpecHash(b *testing.B) {
	spec := specWithTemplate(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"ns"},` +
		`"spec":{"remediationAction":"inform","severity":"low","object-templates":[{"complianceType":"musthave",` +
		`"objectDefinition":{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"prod","labels":{"team":"a"}}}}]}}`)
	b.Run("seen", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			SpecHash(spec)
		}
	})
	b.Run("canonical", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			canonicalSpecHash(spec)
		}
	})
}
