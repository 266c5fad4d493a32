package signaturestest

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/sigstore/sigstore-go/pkg/root"
	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/sigstore/sigstore/pkg/signature/payload"

	"regent.dev/regent/policyserver/signatures"
)

// SignedAt is when keyless signatures are logged unless told otherwise: a fixed time, so that
// tests do not depend on the clock; the test Sigstore's CA and log are trusted long around it.
var SignedAt = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// Sigstore is a private Sigstore instance for tests: a Fulcio-like CA that issues short-lived
// signing certificates carrying Fulcio's identity extensions, and a Rekor-like log key that signs
// entry timestamps. Signatures it makes are what `cosign sign` makes in keyless mode.
type Sigstore struct {
	CA       *x509.Certificate
	caKey    *ecdsa.PrivateKey
	rekorKey *ecdsa.PrivateKey
	// LogID is the Rekor log's id: the hex SHA-256 of its public key.
	LogID string
}

// NewSigstore makes a Sigstore instance for the test.
func NewSigstore(t testing.TB) *Sigstore {
	t.Helper()
	caKey := newECDSA(t)
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "test-fulcio", Organization: []string{"regent.test"}},
		NotBefore:             SignedAt.AddDate(-5, 0, 0),
		NotAfter:              SignedAt.AddDate(5, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	ca, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	rekorKey := newECDSA(t)
	pub, err := x509.MarshalPKIXPublicKey(&rekorKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	id := sha256.Sum256(pub)
	return &Sigstore{CA: ca, caKey: caKey, rekorKey: rekorKey, LogID: hex.EncodeToString(id[:])}
}

func newECDSA(t testing.TB) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TrustConfig is the instance's ClientTrustConfig JSON, what a sigstoreTrustConfig ConfigMap
// holds under sigstore-trust-config: its CA and its log, trusted from five years before SignedAt.
func (s *Sigstore) TrustConfig(t testing.TB) []byte {
	t.Helper()
	start := SignedAt.AddDate(-5, 0, 0)
	id, _ := hex.DecodeString(s.LogID)
	tr, err := root.NewTrustedRoot(root.TrustedRootMediaType01,
		[]root.CertificateAuthority{&root.FulcioCertificateAuthority{Root: s.CA, ValidityPeriodStart: start, URI: "https://fulcio.regent.test"}},
		nil, nil,
		map[string]*root.TransparencyLog{s.LogID: {BaseURL: "https://rekor.regent.test", ID: id, ValidityPeriodStart: start,
			HashFunc: crypto.SHA256, PublicKey: &s.rekorKey.PublicKey, SignatureHashFunc: crypto.SHA256}})
	if err != nil {
		t.Fatal(err)
	}
	trustedRoot, err := tr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(map[string]any{
		"mediaType":     "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json",
		"trustedRoot":   json.RawMessage(trustedRoot),
		"signingConfig": map[string]any{"mediaType": "application/vnd.dev.sigstore.signingconfig.v0.2+json"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TrustRoot is the instance's trust root, parsed.
func (s *Sigstore) TrustRoot(t testing.TB) *signatures.TrustRoot {
	t.Helper()
	tr, err := signatures.ParseTrustRoot(s.TrustConfig(t))
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// Identity is who a keyless signing certificate is issued to.
type Identity struct {
	// Issuer is the OIDC issuer (Fulcio's extension 1.3.6.1.4.1.57264.1.8).
	Issuer string
	// Subject is an email, or a URI when it has a scheme (a workflow's).
	Subject string
	// Repository is a GitHub Actions workflow's owner/repo (extension .1.5).
	Repository string
}

// GitHubWorkflow is the identity Fulcio gives a workflow of owner/repo on GitHub Actions.
func GitHubWorkflow(ownerRepo string) Identity {
	return Identity{Issuer: signatures.GitHubActionsIssuer, Subject: "https://github.com/" + ownerRepo + "/.github/workflows/release.yml@refs/tags/v1.0.0", Repository: ownerRepo}
}

// Keyless tunes SignKeyless, mostly to make signatures that must be refused.
type Keyless struct {
	Annotations map[string]string
	// SignedAt is when the log says it integrated the signature (default SignedAt).
	SignedAt time.Time
	// CertificateFrom is when the certificate's ten minutes of validity begin (default a minute
	// before the signing time).
	CertificateFrom time.Time
	// IssuedBy issues the certificate from another instance's CA (its log still logs it).
	IssuedBy *Sigstore
	// NoBundle leaves the Rekor bundle out; TamperSET changes the logged time after signing.
	NoBundle, TamperSET bool
}

// SignKeyless adds a keyless signature of the artifact at digest, by id, to its signature image,
// as `cosign sign` does without a key: an ephemeral key, a certificate for it from the CA, the
// signature, and the log's bundle.
func (s *Sigstore) SignKeyless(t testing.TB, digest name.Digest, id Identity, o Keyless) {
	t.Helper()
	if o.SignedAt.IsZero() {
		o.SignedAt = SignedAt
	}
	if o.CertificateFrom.IsZero() {
		o.CertificateFrom = o.SignedAt.Add(-time.Minute)
	}
	issuer := s
	if o.IssuedBy != nil {
		issuer = o.IssuedBy
	}
	optional := map[string]any{}
	for k, v := range o.Annotations {
		optional[k] = v
	}
	body, err := payload.Cosign{Image: digest, Annotations: optional}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	key := newECDSA(t)
	certPEM := issuer.issue(t, key, id, o.CertificateFrom)
	signer, err := signature.LoadSigner(key, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	sig, err := signer.SignMessage(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	annotations := map[string]string{
		signatures.SignatureAnnotation:   base64.StdEncoding.EncodeToString(sig),
		signatures.CertificateAnnotation: string(certPEM),
		signatures.ChainAnnotation:       string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: issuer.CA.Raw})),
	}
	if !o.NoBundle {
		annotations[signatures.BundleAnnotation] = s.bundle(t, body, sig, certPEM, o.SignedAt, o.TamperSET)
	}
	appendSignature(t, digest, body, annotations)
}

// issue makes a Fulcio-like signing certificate for key and id, valid ten minutes from from.
func (s *Sigstore) issue(t testing.TB, key *ecdsa.PrivateKey, id Identity, from time.Time) []byte {
	t.Helper()
	issuerExt, err := asn1.MarshalWithParams(id.Issuer, "utf8")
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(from.UnixNano()),
		NotBefore:    from,
		NotAfter:     from.Add(10 * time.Minute),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
		ExtraExtensions: []pkix.Extension{
			{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 8}, Value: issuerExt},
		},
	}
	if id.Repository != "" {
		// The deprecated extension holds the raw string, as Fulcio still writes it.
		tmpl.ExtraExtensions = append(tmpl.ExtraExtensions, pkix.Extension{Id: asn1.ObjectIdentifier{1, 3, 6, 1, 4, 1, 57264, 1, 5}, Value: []byte(id.Repository)})
	}
	if strings.Contains(id.Subject, "://") {
		u, err := url.Parse(id.Subject)
		if err != nil {
			t.Fatal(err)
		}
		tmpl.URIs = []*url.URL{u}
	} else {
		tmpl.EmailAddresses = []string{id.Subject}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.CA, &key.PublicKey, s.caKey)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// bundle logs a hashedrekord entry of the signature and returns the bundle cosign annotates it
// with, its SignedEntryTimestamp made with the log's key.
func (s *Sigstore) bundle(t testing.TB, body, sig, certPEM []byte, at time.Time, tamper bool) string {
	t.Helper()
	sum := sha256.Sum256(body)
	entry, err := json.Marshal(map[string]any{
		"apiVersion": "0.0.1", "kind": "hashedrekord",
		"spec": map[string]any{
			"data":      map[string]any{"hash": map[string]string{"algorithm": "sha256", "value": hex.EncodeToString(sum[:])}},
			"signature": map[string]any{"content": sig, "publicKey": map[string]any{"content": certPEM}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := signatures.RekorPayload{Body: base64.StdEncoding.EncodeToString(entry), IntegratedTime: at.Unix(), LogID: s.LogID, LogIndex: 42}
	signer, err := signature.LoadSigner(s.rekorKey, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	set, err := signer.SignMessage(bytes.NewReader(p.Canonical()))
	if err != nil {
		t.Fatal(err)
	}
	if tamper {
		p.IntegratedTime -= 30 // a signature made a little earlier, say: the log never said so
	}
	b, err := json.Marshal(signatures.RekorBundle{SignedEntryTimestamp: set, Payload: p})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// CodeSigningCertificate is a long-lived certificate for key-based signing with a certificate
// (SigstoreCertificateVerify), issued by the instance's CA to subject, with its key.
func (s *Sigstore) CodeSigningCertificate(t testing.TB, subject string) (certPEM []byte, key Key) {
	t.Helper()
	priv := newECDSA(t)
	tmpl := &x509.Certificate{
		SerialNumber:   big.NewInt(7),
		Subject:        pkix.Name{CommonName: subject},
		EmailAddresses: []string{subject},
		NotBefore:      SignedAt.AddDate(-1, 0, 0),
		NotAfter:       SignedAt.AddDate(1, 0, 0),
		KeyUsage:       x509.KeyUsageDigitalSignature,
		ExtKeyUsage:    []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, s.CA, &priv.PublicKey, s.caKey)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := signature.LoadSigner(priv, crypto.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), Key{Signer: signer}
}

// CAPEM is the instance's CA certificate, PEM.
func (s *Sigstore) CAPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.CA.Raw})
}

// SignWithCertificate adds a signature of the artifact at digest made with key, the key of
// certPEM, to its signature image, as `cosign sign --key … --certificate …` does: the
// certificate annotated, and logged (a Rekor bundle) when logged is set.
func (s *Sigstore) SignWithCertificate(t testing.TB, digest name.Digest, certPEM []byte, key Key, logged bool) {
	t.Helper()
	body, err := payload.Cosign{Image: digest}.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	sig, err := key.Signer.SignMessage(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	annotations := map[string]string{
		signatures.SignatureAnnotation:   base64.StdEncoding.EncodeToString(sig),
		signatures.CertificateAnnotation: string(certPEM),
	}
	if logged {
		annotations[signatures.BundleAnnotation] = s.bundle(t, body, sig, certPEM, SignedAt, false)
	}
	appendSignature(t, digest, body, annotations)
}
