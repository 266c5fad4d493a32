package signatures

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/sigstore/sigstore-go/pkg/fulcio/certificate"
)

// GitHubActionsIssuer is the OIDC issuer of GitHub Actions' workflow identities: a githubAction
// requirement accepts only certificates Fulcio issued for it.
const GitHubActionsIssuer = "https://token.actions.githubusercontent.com"

// compileKeyless checks a keyless requirement's fields.
func (r *Requirement) compileKeyless() error {
	if strings.TrimSpace(r.Key) != "" {
		return fmt.Errorf("%s: a keyless requirement has no key", r.Kind)
	}
	switch r.Kind {
	case KindGenericIssuer:
		if r.Issuer == "" {
			return errors.New("genericIssuer without an issuer")
		}
		if r.Subject == nil || (r.Subject.Equal == "") == (r.Subject.URLPrefix == "") {
			return fmt.Errorf("genericIssuer %s: subject needs exactly one of equal and urlPrefix", r.Issuer)
		}
		if r.Subject.URLPrefix != "" {
			u, err := url.Parse(r.Subject.URLPrefix)
			if err != nil || u.Scheme == "" || u.Host == "" {
				return fmt.Errorf("genericIssuer %s: subject.urlPrefix %q is not an absolute URL", r.Issuer, r.Subject.URLPrefix)
			}
			// As Kubewarden does: a prefix is a path, so it ends in a slash, and
			// https://github.com/org does not match https://github.com/organisation/….
			r.prefix = r.Subject.URLPrefix
			if !strings.HasSuffix(r.prefix, "/") {
				r.prefix += "/"
			}
		}
	case KindGitHubAction:
		if r.Owner == "" {
			return errors.New("githubAction without an owner")
		}
		if r.Issuer != "" || r.Subject != nil {
			return fmt.Errorf("githubAction of %s: issuer and subject are genericIssuer's (a githubAction's issuer is %s)", r.Owner, GitHubActionsIssuer)
		}
	}
	return nil
}

// identity is who a Fulcio certificate was issued to.
type identity struct {
	// issuer is the OIDC issuer, from Fulcio's extension 1.3.6.1.4.1.57264.1.8 (or the
	// deprecated .1.1).
	issuer string
	// subject is the subject alternative name: an email or a URI (a workflow's, for CI).
	subject    string
	subjectURI bool
	// repository is the GitHub repository (owner/name) of a GitHub Actions workflow, from the
	// extension .1.5 or, failing it, the source repository URI of .1.12.
	repository string
}

// certificateIdentity reads who leaf was issued to.
func certificateIdentity(leaf *x509.Certificate) (identity, error) {
	s, err := certificate.SummarizeCertificate(leaf)
	if err != nil {
		return identity{}, fmt.Errorf("its certificate names no identity: %v", err)
	}
	id := identity{issuer: s.Issuer, subject: s.SubjectAlternativeName, subjectURI: len(leaf.URIs) > 0, repository: s.GithubWorkflowRepository}
	if id.repository == "" {
		if u, err := url.Parse(s.SourceRepositoryURI); err == nil && u.Host == "github.com" {
			id.repository = strings.Trim(u.Path, "/")
		}
	}
	return id, nil
}

func (id identity) String() string {
	return fmt.Sprintf("%s (issuer %s)", id.subject, id.issuer)
}

// identityMismatch says why id is not the identity r asks for, "" when it is, and how close it
// came: 0 for another issuer, 1 for the right issuer and another subject or repository.
func (r *Requirement) identityMismatch(id identity) (int, string) {
	switch r.Kind {
	case KindGenericIssuer:
		if id.issuer != r.Issuer {
			return 0, fmt.Sprintf("a keyless signature is by %s, from another issuer", id)
		}
		if r.Subject.Equal != "" && id.subject != r.Subject.Equal {
			return 1, fmt.Sprintf("a keyless signature is by %s, another subject", id)
		}
		if r.prefix != "" && !strings.HasPrefix(id.subject, r.prefix) {
			return 1, fmt.Sprintf("a keyless signature is by %s, a subject not under %s", id, r.prefix)
		}
	case KindGitHubAction:
		if id.issuer != GitHubActionsIssuer {
			return 0, fmt.Sprintf("a keyless signature is by %s, not a GitHub Actions workflow", id)
		}
		u, err := url.Parse(id.subject)
		if !id.subjectURI || err != nil || u.Host != "github.com" {
			return 1, fmt.Sprintf("a keyless signature from GitHub Actions names %s, not a workflow on github.com", id.subject)
		}
		owner, repo, ok := strings.Cut(id.repository, "/")
		if !ok || owner == "" || repo == "" {
			return 1, fmt.Sprintf("a keyless signature from GitHub Actions (%s) has no workflow repository extension (1.3.6.1.4.1.57264.1.5)", id.subject)
		}
		if owner != r.Owner {
			return 1, fmt.Sprintf("a keyless signature is by a workflow of %s/%s, another owner", owner, repo)
		}
		if r.Repo != "" && repo != r.Repo {
			return 1, fmt.Sprintf("a keyless signature is by a workflow of %s/%s, another repository", owner, repo)
		}
	}
	return 0, ""
}

// parseCertificates reads the PEM certificates of s (a certificate or chain annotation).
func parseCertificates(s string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := []byte(s)
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errors.New("no PEM certificate")
	}
	return certs, nil
}
