package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-logr/logr"

	"regent.dev/regent/policyserver/signatures/signaturestest"
)

// The policy server starts whatever its signature files hold; what it cannot read makes it
// trust less, never more, and says why on every module it refuses.
func TestLoadSignatureTrust_UnreadableFilesTrustNothing_AndSayWhy(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	trust := write("trust.json", string(signaturestest.NewSigstore(t).TrustConfig(t)))
	badTrust := write("bad-trust.json", "not json")
	keyless := write("keyless.yaml", "apiVersion: v1\nallOf:\n  - kind: githubAction\n    owner: kubewarden\n")
	pubKey := write("pubkey.yaml", "apiVersion: v1\nallOf:\n  - kind: pubKey\n    key: |\n      "+
		strings.ReplaceAll(strings.TrimSpace(signaturestest.NewKey(t).PublicPEM), "\n", "\n      ")+"\n")
	for name, tc := range map[string]struct {
		verification, trust string
		wantTrust           bool
		refusal             string // "" : a usable configuration (or none)
	}{
		"Nothing":                      {"", "", false, ""},
		"TrustRootOnly_ForHostCalls":   {"", trust, true, ""},
		"Keyless_WithTheTrustRoot":     {keyless, trust, true, ""},
		"Keyless_WithoutATrustRoot":    {keyless, "", false, "sigstoreTrustConfig"},
		"PubKey_UnreadableTrustRoot":   {pubKey, badTrust, false, "sigstore trust config"},
		"UnreadableVerificationConfig": {filepath.Join(dir, "absent.yaml"), trust, true, "verification config"},
	} {
		t.Run(name, func(t *testing.T) {
			gotTrust, cfg := loadSignatureTrust(tc.verification, tc.trust, logr.Discard())
			if (gotTrust != nil) != tc.wantTrust {
				t.Errorf("trust root %v, want one: %v", gotTrust, tc.wantTrust)
			}
			if tc.verification == "" {
				if cfg != nil {
					t.Errorf("a configuration without --verification-config: %+v", cfg)
				}
				return
			}
			err := cfg.Check("sha256:"+strings.Repeat("0", 64), nil)
			broken := err != nil && strings.Contains(err.Error(), "cannot be used")
			if tc.refusal == "" && broken {
				t.Fatalf("usable configuration refused: %v", err)
			}
			if tc.refusal != "" && (!broken || !strings.Contains(err.Error(), tc.refusal)) {
				t.Fatalf("got %v, want every module refused saying %q", err, tc.refusal)
			}
		})
	}
}
