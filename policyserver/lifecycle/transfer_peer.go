package lifecycle

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sync"
)

// peerCheck authenticates the leader a replica fetches from: the leader is reached at its pod
// IP, so its serving certificate is checked against the name it is issued for (the Service's)
// and the CA bundle that issues it, read again whenever the file changes (the serving CA
// rotates, and a mounted ConfigMap is replaced under the process).
type peerCheck struct {
	caFile, name string

	mu sync.Mutex
	// read is the file as stat saw it when roots were read from it: a handshake whose stat finds
	// the same file unchanged (same inode, size and modification time) skips the read. A mounted
	// ConfigMap is replaced by a new file, not written in place.
	read  os.FileInfo
	roots *x509.CertPool
}

func (p *peerCheck) pool() (*x509.CertPool, error) {
	fi, err := os.Stat(p.caFile)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.roots != nil && os.SameFile(fi, p.read) && fi.Size() == p.read.Size() && fi.ModTime().Equal(p.read.ModTime()) {
		return p.roots, nil
	}
	// Stat before the read: a file replaced in between is read again at the next handshake.
	b, err := os.ReadFile(p.caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%s holds no PEM certificate", p.caFile)
	}
	p.read, p.roots = fi, roots
	return roots, nil
}

// verify is the TLS handshake's check of the leader's certificate chain.
func (p *peerCheck) verify(cs tls.ConnectionState) error {
	roots, err := p.pool()
	if err != nil {
		return fmt.Errorf("the leader's certificate cannot be checked: %w", err)
	}
	if len(cs.PeerCertificates) == 0 {
		return errors.New("the leader sent no certificate")
	}
	intermediates := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		intermediates.AddCert(c)
	}
	_, err = cs.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots: roots, Intermediates: intermediates, DNSName: p.name,
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return fmt.Errorf("the leader's certificate is not one %s issues for %s: %w", p.caFile, p.name, err)
	}
	return nil
}

// newTransferClient fetches from a leader at its pod IP, never through a proxy. With
// Options.PeerCAFile it checks the leader's certificate (peerCheck); without, it does not, and
// the transfer still keeps its integrity (the signatures) and its authorization (the token's
// HMAC): see the comment at the top of transfer.go.
func newTransferClient(o Options) *http.Client {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	// The standard check would compare the certificate with the pod IP dialled: the check is
	// VerifyConnection's, against PeerServerName.
	cfg.InsecureSkipVerify = true //nolint:gosec // verified in VerifyConnection when a CA is given
	if o.PeerCAFile != "" {
		cfg.VerifyConnection = (&peerCheck{caFile: o.PeerCAFile, name: o.PeerServerName}).verify
	}
	return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, Proxy: nil}}
}
