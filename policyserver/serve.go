package policyserver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"regent.dev/regent/tlsreload"
)

// ServeTLS serves h over HTTPS on opts.Listener (or opts.Addr) with the certificate in
// opts.CertFile and opts.KeyFile, reloaded when they change, until ctx is done. It is Run's
// serving half, for callers that drive a Server themselves (the PolicyRevision lifecycle).
func ServeTLS(ctx context.Context, opts Options, h http.Handler) error {
	opts = opts.withDefaults()
	if opts.CertFile == "" || opts.KeyFile == "" {
		return errors.New("policy server: a certificate and key file are required (admission webhooks are HTTPS only)")
	}
	certs, err := tlsreload.New(opts.CertFile, opts.KeyFile)
	if err != nil {
		return fmt.Errorf("policy server: %w", err)
	}
	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", opts.Addr); err != nil {
			return fmt.Errorf("policy server: listen: %w", err)
		}
	}
	srv := admissionServer(h, certs)
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	opts.Logger.Info("policy server listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("policy server: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// ServeMetrics serves h over plain HTTP on opts.MetricsListener (or opts.MetricsAddr) until
// ctx is done; with neither it returns at once. Its port is the one the NetworkPolicy opens to
// the cluster's pods only.
func ServeMetrics(ctx context.Context, opts Options, h http.Handler) error {
	ln := opts.MetricsListener
	if ln == nil {
		if opts.MetricsAddr == "" {
			return nil
		}
		var err error
		if ln, err = net.Listen("tcp", opts.MetricsAddr); err != nil {
			return fmt.Errorf("metrics: listen: %w", err)
		}
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("metrics: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// admissionServer is the HTTPS server kube-apiserver calls. Every phase of a connection is
// bounded, so a client that opens connections and sends slowly cannot hold goroutines and
// memory: kube-apiserver gives a webhook at most 30s, so a request not read within that is
// abandoned anyway. ReadTimeout covers headers, the wait for a worker (the body is read only
// once the request has one) and the body.
func admissionServer(h http.Handler, certs *tlsreload.Reloader) *http.Server {
	return &http.Server{
		Handler:           h,
		TLSConfig:         &tls.Config{GetCertificate: certs.GetCertificate, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      35 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}
