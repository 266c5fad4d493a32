// Package tlsreload serves a certificate from a pair of files and picks up a new one when the
// files change, so HTTPS servers (the policy server, the hub's placement API) follow rotated
// Secrets without a restart.
package tlsreload

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// Reloader serves the certificate in a pair of files and picks up a new one when the files
// change (cert-manager and kubelet secret projection rotate them in place), without a restart.
// Files are checked at most once per interval, on a TLS handshake.
type Reloader struct {
	certFile, keyFile string
	interval          time.Duration

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     string
	checkedAt time.Time
}

// New loads the pair, failing when it cannot be read.
func New(certFile, keyFile string) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, interval: time.Second}
	if err := r.reload(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Reloader) fileStamp() (string, error) {
	var s string
	for _, f := range []string{r.certFile, r.keyFile} {
		fi, err := os.Stat(f)
		if err != nil {
			return "", err
		}
		s += fmt.Sprintf("%s:%d:%d;", f, fi.ModTime().UnixNano(), fi.Size())
	}
	return s, nil
}

func (r *Reloader) reload() error {
	stamp, err := r.fileStamp()
	if err != nil {
		return fmt.Errorf("stat certificate: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		return fmt.Errorf("load certificate %s: %w", r.certFile, err)
	}
	r.cert, r.stamp = &cert, stamp
	return nil
}

// GetCertificate keeps serving the previous certificate when the new files are unreadable or
// half-written; the next check tries again.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now := time.Now(); now.Sub(r.checkedAt) >= r.interval {
		r.checkedAt = now
		if stamp, err := r.fileStamp(); err == nil && stamp != r.stamp {
			_ = r.reload()
		}
	}
	return r.cert, nil
}
