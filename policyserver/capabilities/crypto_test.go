package capabilities

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"

	"regent.dev/regent/policyserver/engine"
)

type issued struct {
	cert *x509.Certificate
	der  []byte
	key  *ecdsa.PrivateKey
}

// issue makes a certificate valid from notBefore to notAfter, signed by parent (self-signed
// when parent is nil); CAs may sign, leaves are for code signing, as sigstore's are.
func issue(t *testing.T, cn string, ca bool, parent *issued, notBefore, notAfter time.Time) *issued {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, NotBefore: notBefore, NotAfter: notAfter,
		BasicConstraintsValid: true, IsCA: ca, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}}
	if ca {
		tmpl.KeyUsage = x509.KeyUsageCertSign
	} else {
		tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	}
	signer, signerKey := tmpl, key
	if parent != nil {
		signer, signerKey = parent.cert, parent.key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer, &key.PublicKey, signerKey)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &issued{cert: cert, der: der, key: key}
}

// wire is a certificate as Kubewarden's SDKs send it: its bytes as an array of numbers.
func wire(c *issued, encoding string) map[string]any {
	b := c.der
	if encoding == "Pem" {
		b = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.der})
	}
	data := make([]int, len(b))
	for i, v := range b {
		data[i] = int(v)
	}
	return map[string]any{"encoding": encoding, "data": data}
}

func TestCrypto_IsCertificateTrusted(t *testing.T) {
	now := time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)
	year := 365 * 24 * time.Hour
	root := issue(t, "root", true, nil, now.Add(-year), now.Add(5*year))
	inter := issue(t, "intermediate", true, root, now.Add(-year), now.Add(4*year))
	leaf := issue(t, "signer", false, inter, now.Add(-24*time.Hour), now.Add(year))
	expired := issue(t, "expired", false, inter, now.Add(-year), now.Add(-24*time.Hour))
	future := issue(t, "future", false, inter, now.Add(24*time.Hour), now.Add(year))
	otherRoot := issue(t, "other root", true, nil, now.Add(-year), now.Add(5*year))
	chain := []any{wire(inter, "Pem"), wire(root, "Pem")}

	h, _ := New(Options{Clock: clocktesting.NewFakePassiveClock(now)})
	for _, tc := range []struct {
		name    string
		request map[string]any
		trusted bool
		reason  string // a part of it
	}{
		{"signed through the chain", map[string]any{"cert": wire(leaf, "Pem"), "cert_chain": chain}, true, ""},
		{"DER encoding", map[string]any{"cert": wire(leaf, "Der"), "cert_chain": []any{wire(inter, "Der"), wire(root, "Der")}}, true, ""},
		{"no chain trusts the certificate as it is", map[string]any{"cert": wire(leaf, "Pem"), "cert_chain": nil, "not_after": ""}, true, ""},
		{"another root", map[string]any{"cert": wire(leaf, "Pem"), "cert_chain": []any{wire(inter, "Pem"), wire(otherRoot, "Pem")}}, false, "certificate is not trusted by the given chain"},
		{"chain without the intermediate", map[string]any{"cert": wire(leaf, "Pem"), "cert_chain": []any{wire(root, "Pem")}}, false, "certificate is not trusted by the given chain"},
		{"expired, but no not_after: never expires", map[string]any{"cert": wire(expired, "Pem"), "cert_chain": chain}, true, ""},
		{"expired before not_after", map[string]any{"cert": wire(expired, "Pem"), "cert_chain": chain, "not_after": now.Format(time.RFC3339)}, false, "certificate expires at"},
		{"not valid yet", map[string]any{"cert": wire(future, "Pem"), "cert_chain": chain}, false, "certificate is not valid before"},
	} {
		payload, _ := json.Marshal(tc.request)
		raw, err := h.Call(context.Background(), engine.HostCall{Binding: "kubewarden", Namespace: "crypto", Operation: "v1/is_certificate_trusted", Payload: payload})
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		var got struct {
			Trusted bool   `json:"trusted"`
			Reason  string `json:"reason"`
		}
		if err := json.Unmarshal(raw, &got); err != nil {
			t.Fatal(err)
		}
		if got.Trusted != tc.trusted || !strings.Contains(got.Reason, tc.reason) || (tc.trusted && got.Reason != "") {
			t.Errorf("%s: got %s, want trusted=%v with a reason containing %q", tc.name, raw, tc.trusted, tc.reason)
		}
	}
	for _, tc := range []struct {
		name, payload, want string
	}{
		{"malformed not_after", `{"cert":` + mustJSON(wire(leaf, "Pem")) + `,"not_after":"yesterday"}`, `not_after "yesterday" is not an RFC 3339 time`},
		{"not a certificate", `{"cert":{"encoding":"Pem","data":[104,105]}}`, "cert: data is not a PEM CERTIFICATE block"},
		{"unknown encoding", `{"cert":{"encoding":"Base64","data":[]}}`, `encoding "Base64" is neither Pem nor Der`},
	} {
		_, err := h.Call(context.Background(), engine.HostCall{Binding: "kubewarden", Namespace: "crypto", Operation: "v1/is_certificate_trusted", Payload: []byte(tc.payload)})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: want an error containing %q, got %v", tc.name, tc.want, err)
		}
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
