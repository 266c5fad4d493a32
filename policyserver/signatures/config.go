package signatures

import (
	"crypto"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/sigstore/sigstore/pkg/cryptoutils"
	"github.com/sigstore/sigstore/pkg/signature"
	"sigs.k8s.io/yaml"
)

// ConfigMapKey is the key of a PolicyServer's verificationConfig ConfigMap that holds the
// configuration, as in Kubewarden.
const ConfigMapKey = "verification-config"

// Config is Kubewarden's verification-config format.
type Config struct {
	APIVersion string        `json:"apiVersion"`
	AllOf      []Requirement `json:"allOf,omitempty"`
	AnyOf      *AnyOf        `json:"anyOf,omitempty"`

	fingerprint string
	// broken is why the configuration cannot be used; such a Config trusts nothing.
	broken error
	// trust is what keyless requirements are checked against; nil when no trust root is given,
	// and then the configuration has no keyless requirement.
	trust *TrustRoot
}

// Broken is a configuration that could not be read: it trusts no module, and every refusal says
// why, so a typo in the ConfigMap shows on every policy instead of serving modules unverified.
func Broken(err error) *Config {
	return &Config{broken: err, fingerprint: "unusable"}
}

// Fingerprint names this configuration's content, to tell what a module was verified against.
func (c *Config) Fingerprint() string { return c.fingerprint }

// AnyOf lists requirements of which at least MinimumMatches (default 1) must be met.
type AnyOf struct {
	MinimumMatches int           `json:"minimumMatches,omitempty"`
	Signatures     []Requirement `json:"signatures"`
}

// Requirement is one signature the artifact must carry.
type Requirement struct {
	// Kind is pubKey, genericIssuer or githubAction (and certificate, built by Certificate for
	// a policy's request only: it is no kind of Kubewarden's verification-config).
	Kind string `json:"kind"`
	// Owner names who holds the key (pubKey, informative) or the GitHub owner (githubAction).
	Owner string `json:"owner,omitempty"`
	// Key is the PEM public key of a pubKey requirement.
	Key string `json:"key,omitempty"`
	// Repo is the GitHub repository of a githubAction requirement.
	Repo string `json:"repo,omitempty"`
	// Issuer and Subject are a genericIssuer's certificate identity.
	Issuer  string   `json:"issuer,omitempty"`
	Subject *Subject `json:"subject,omitempty"`
	// Annotations must all be in the signature's payload, with these values.
	Annotations map[string]string `json:"annotations,omitempty"`

	verifier signature.Verifier
	// prefix is URLPrefix as matched: ending in a slash, so https://github.com/org does not
	// match https://github.com/organisation.
	prefix string
	// certificate is a certificate requirement's: its key must have made the signature.
	certificate *x509.Certificate
	// requireBundle: a certificate requirement accepts only signatures with a Rekor bundle.
	requireBundle bool
}

// Subject matches a keyless certificate's subject: exactly, or under a URL prefix.
type Subject struct {
	Equal     string `json:"equal,omitempty"`
	URLPrefix string `json:"urlPrefix,omitempty"`
}

// Requirement kinds.
const (
	KindPubKey        = "pubKey"
	KindGenericIssuer = "genericIssuer"
	KindGitHubAction  = "githubAction"
	KindCertificate   = "certificate"
)

// LoadFile reads a configuration file (a mounted verificationConfig ConfigMap's key); trust is
// the Sigstore trust root its keyless requirements are checked against (nil: none, and a keyless
// requirement is an error).
func LoadFile(path string, trust *TrustRoot) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("verification config: %w", err)
	}
	c, err := Parse(b, trust)
	if err != nil {
		return nil, fmt.Errorf("verification config %s: %w", path, err)
	}
	return c, nil
}

// Parse reads and checks a configuration: unknown fields, kinds and unreadable keys are errors,
// since a requirement misread would trust more than the operator meant. Keyless requirements
// need trust, the Sigstore trust root (ErrNoTrustRoot without one).
func Parse(b []byte, trust *TrustRoot) (*Config, error) {
	var c Config
	if err := yaml.UnmarshalStrict(b, &c); err != nil {
		return nil, err
	}
	c.trust = trust
	if c.APIVersion != "v1" {
		return nil, fmt.Errorf("apiVersion %q is not supported (want v1)", c.APIVersion)
	}
	for i := range c.AllOf {
		if err := c.AllOf[i].compile(trust); err != nil {
			return nil, fmt.Errorf("allOf[%d]: %w", i, err)
		}
	}
	if c.AnyOf != nil {
		for i := range c.AnyOf.Signatures {
			if err := c.AnyOf.Signatures[i].compile(trust); err != nil {
				return nil, fmt.Errorf("anyOf.signatures[%d]: %w", i, err)
			}
		}
		if c.AnyOf.MinimumMatches < 0 {
			return nil, fmt.Errorf("anyOf.minimumMatches %d is negative", c.AnyOf.MinimumMatches)
		}
		if c.AnyOf.MinimumMatches == 0 {
			c.AnyOf.MinimumMatches = 1
		}
		if c.AnyOf.MinimumMatches > len(c.AnyOf.Signatures) {
			return nil, fmt.Errorf("anyOf.minimumMatches %d is more than the %d signatures listed: nothing could be trusted", c.AnyOf.MinimumMatches, len(c.AnyOf.Signatures))
		}
	}
	if len(c.AllOf) == 0 && (c.AnyOf == nil || len(c.AnyOf.Signatures) == 0) {
		return nil, errors.New("no requirement in allOf or anyOf: every module would be trusted")
	}
	c.fingerprint = fingerprint(b, trust)
	return &c, nil
}

// fingerprint names a configuration and the trust root it is checked against: a new trust root
// is a new configuration, and modules verified against the old one are verified again.
func fingerprint(config []byte, trust *TrustRoot) string {
	h := sha256.New()
	h.Write(config)
	if trust != nil {
		h.Write([]byte("\x00sigstore-trust-config\x00" + trust.fingerprint))
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)[:8])
}

// compile checks a requirement and readies its verifier.
func (r *Requirement) compile(trust *TrustRoot) error {
	switch r.Kind {
	case KindPubKey:
		if strings.TrimSpace(r.Key) == "" {
			return errors.New("pubKey without a key")
		}
		pub, err := cryptoutils.UnmarshalPEMToPublicKey([]byte(r.Key))
		if err != nil {
			return fmt.Errorf("pubKey%s: %w", r.owner(), err)
		}
		if r.verifier, err = signature.LoadVerifier(pub, crypto.SHA256); err != nil {
			return fmt.Errorf("pubKey%s: %w", r.owner(), err)
		}
		return nil
	case KindGenericIssuer, KindGitHubAction:
		if err := r.compileKeyless(); err != nil {
			return err
		}
		if trust == nil {
			return fmt.Errorf("%s: %w", r, ErrNoTrustRoot)
		}
		return nil
	case "":
		return errors.New("no kind (want pubKey, genericIssuer or githubAction)")
	}
	return fmt.Errorf("unknown kind %q (want pubKey, genericIssuer or githubAction)", r.Kind)
}

func (r *Requirement) owner() string {
	if r.Owner == "" {
		return ""
	}
	return " of " + r.Owner
}

// String names the requirement in messages.
func (r *Requirement) String() string {
	switch r.Kind {
	case KindGenericIssuer:
		if r.Subject != nil && r.Subject.URLPrefix != "" {
			return fmt.Sprintf("genericIssuer %s, subject under %s", r.Issuer, r.prefix)
		}
		if r.Subject != nil {
			return fmt.Sprintf("genericIssuer %s, subject %s", r.Issuer, r.Subject.Equal)
		}
	case KindGitHubAction:
		if r.Repo != "" {
			return fmt.Sprintf("githubAction %s/%s", r.Owner, r.Repo)
		}
		return "githubAction of " + r.Owner
	case KindCertificate:
		if r.certificate != nil {
			return fmt.Sprintf("certificate %q", r.certificate.Subject.String())
		}
	}
	return r.Kind + r.owner()
}

// AllOf is the configuration a policy's verification request stands for: every requirement must
// be met. trust is the Sigstore trust root keyless requirements are checked against.
func AllOf(trust *TrustRoot, reqs ...Requirement) (*Config, error) {
	if len(reqs) == 0 {
		return nil, errors.New("no requirement: nothing to verify against")
	}
	c := &Config{APIVersion: "v1", fingerprint: "request", trust: trust}
	for i, r := range reqs {
		if r.Kind != KindCertificate { // built and checked by Certificate
			if err := r.compile(trust); err != nil {
				return nil, fmt.Errorf("allOf[%d]: %w", i, err)
			}
		}
		c.AllOf = append(c.AllOf, r)
	}
	return c, nil
}
