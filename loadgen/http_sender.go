package loadgen

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"time"
)

// DefaultTimeout is how long an open loop's HTTP request may take before it counts as Failed:
// kube-apiserver's default webhook timeout (timeoutSeconds: 10).
const DefaultTimeout = 10 * time.Second

// NewClient is the HTTPS client of an open loop: one pool of keep-alive connections shared by all
// requests, as kube-apiserver's webhook client has, opening another connection whenever every
// open one is busy; caPEM verifies the server.
func NewClient(caPEM []byte, timeout time.Duration) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &http.Client{Timeout: timeout, Transport: &http.Transport{
		TLSClientConfig:     &tls.Config{RootCAs: pool},
		MaxIdleConnsPerHost: DefaultMaxInFlight,
		DisableCompression:  true,
	}}
}

// HTTPSender posts t's body to t's URL for every request: a 200 answer that t.Check accepts is
// Correct, one it rejects Wrong, 429 Rejected, anything else Failed.
func HTTPSender(client *http.Client, t Target) Sender {
	return func(ctx context.Context, _ int) (Outcome, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, t.URL, bytes.NewReader(t.Body))
		if err != nil {
			return Failed, err
		}
		req.Header.Set("Content-Type", "application/json")
		for k, v := range t.Headers {
			req.Header.Set(k, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			return Failed, err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return Failed, err
		}
		switch {
		case resp.StatusCode == http.StatusTooManyRequests:
			return Rejected, fmt.Errorf("status 429: %.200s", b)
		case resp.StatusCode != http.StatusOK:
			return Failed, fmt.Errorf("status %d: %.200s", resp.StatusCode, b)
		}
		if t.Check != nil {
			if err := t.Check(b); err != nil {
				return Wrong, err
			}
		}
		return Correct, nil
	}
}
