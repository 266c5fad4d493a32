package policyserver

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"regent.dev/regent/policyserver/selfsigned"
)

// TestRun_MetricsAreNotServedOnTheAdmissionListener: the admission port is the one the
// NetworkPolicy opens to every source (the apiserver's address cannot be known), so it serves
// admission and probes only; metrics have their own listener.
func TestRun_MetricsAreNotServedOnTheAdmissionListener(t *testing.T) {
	certs, err := selfsigned.Write(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{Listener: ln, CertFile: certs.CertFile, KeyFile: certs.KeyFile, CacheDir: t.TempDir()}
	mln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.MetricsListener = mln
	metricsURL := "http://" + mln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- Run(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CAPEM)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	admission := "https://" + ln.Addr().String()
	waitFor(t, func() bool { code, _ := getURL(client, admission+"/livez"); return code == http.StatusOK })

	if code, body := getURL(client, admission+"/metrics"); code != http.StatusNotFound {
		t.Errorf("the admission listener answered /metrics with %d (%.80q), want 404", code, body)
	}
	code, body := getURL(http.DefaultClient, metricsURL+"/metrics")
	if code != http.StatusOK || !strings.Contains(body, "regent_policyserver_policies_loaded") {
		t.Errorf("the metrics listener answered %d %.200q", code, body)
	}
}

func getURL(c *http.Client, url string) (int, string) {
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
