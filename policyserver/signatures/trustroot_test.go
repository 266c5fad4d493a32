package signatures_test

import (
	"encoding/json"
	"strings"
	"testing"

	"regent.dev/regent/policyserver/signatures"
	"regent.dev/regent/policyserver/signatures/signaturestest"
)

func TestParseTrustRoot_ReadsAClientTrustConfigOrABareTrustedRoot(t *testing.T) {
	s := signaturestest.NewSigstore(t)
	client := s.TrustConfig(t)
	var parts map[string]json.RawMessage
	if err := json.Unmarshal(client, &parts); err != nil {
		t.Fatal(err)
	}
	withoutCAs := strings.Replace(string(parts["trustedRoot"]), `"certificateAuthorities"`, `"unknownAuthorities"`, 1)
	for name, tc := range map[string]struct {
		json string
		says string
	}{
		"ClientTrustConfig":                    {string(client), ""},
		"BareTrustedRoot":                      {string(parts["trustedRoot"]), ""},
		"SnakeCaseFields":                      {strings.Replace(string(client), `"trustedRoot"`, `"trusted_root"`, 1), ""},
		"NotJSON":                              {"apiVersion: v1", "neither a ClientTrustConfig nor a trusted root"},
		"NoFulcioCA":                           {withoutCAs, "no Fulcio certificate authority"},
		"EmptyObject":                          {"{}", "media type"},
		"ClientTrustConfig_WithAnUnknownField": {strings.Replace(string(client), `{`, `{"newerField": {"x": 1}, `, 1), ""},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := signatures.ParseTrustRoot([]byte(tc.json))
			if tc.says == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("got %v, want an error saying %q", err, tc.says)
			}
		})
	}
}
