package opa

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"regent.dev/regent/tlsreload"
)

// Options configure the placement engine and its query API in the hub.
type Options struct {
	// Addr is where the HTTPS data API listens; Run needs it.
	Addr string
	// CertFile and KeyFile are the serving certificate, re-read when they change on disk (a
	// mounted Secret rotated by cert-manager).
	CertFile, KeyFile string
	// Namespace holds the policy ConfigMaps.
	Namespace string
	// Inventory is replicated besides DefaultInventory.
	Inventory []schema.GroupVersionResource
	// Admission configures the Placement webhook (served at AdmissionPath on Addr) and the
	// remediator.
	Admission AdmissionOptions
	// Handlers are served on Addr beside the data API, by ServeMux pattern (the fleet dashboard
	// at /dashboard/); each authorizes its own requests.
	Handlers map[string]http.Handler
}

// Run loads policies, replicates the inventory and serves the data API on opts.Addr until ctx
// ends.
func Run(ctx context.Context, cfg *rest.Config, opts Options) error {
	ln, err := net.Listen("tcp", opts.Addr)
	if err != nil {
		return fmt.Errorf("placement API: %w", err)
	}
	return Serve(ctx, cfg, opts, ln)
}

// Serve is Run on a listener the caller opened; it closes ln.
func Serve(ctx context.Context, cfg *rest.Config, opts Options, ln net.Listener) error {
	if opts.CertFile == "" || opts.KeyFile == "" || opts.Namespace == "" {
		ln.Close()
		return errors.New("placement API: a certificate, a key and a policy namespace are required")
	}
	certs, err := tlsreload.New(opts.CertFile, opts.KeyFile)
	if err != nil {
		ln.Close()
		return fmt.Errorf("placement API: %w", err)
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		ln.Close()
		return err
	}
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "regent-placement"})

	engine := NewEngine()
	policies := NewPolicies(engine, kube, opts.Namespace, recorder)
	if err := policies.Start(ctx); err != nil {
		ln.Close()
		return err
	}
	if err := NewInventory(engine, dyn, append(append([]schema.GroupVersionResource{}, DefaultInventory...), opts.Inventory...)).Start(ctx); err != nil {
		ln.Close()
		return err
	}
	mux := http.NewServeMux()
	mux.Handle("/", &Handler{Engine: engine, Auth: NewAuthorizer(kube)})
	for pattern, h := range opts.Handlers {
		mux.Handle(pattern, h)
	}
	if !opts.Admission.Disabled {
		if opts.Admission.LeaderElectionNamespace == "" {
			opts.Admission.LeaderElectionNamespace = opts.Namespace
		}
		admit, err := startAdmission(ctx, engine, policies, kube, dyn, recorder, opts.Admission)
		if err != nil {
			ln.Close()
			return err
		}
		mux.Handle(AdmissionPath, admit.Handler())
	}
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 10 * time.Second,
		TLSConfig:         &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate},
	}
	done := make(chan error, 1)
	go func() { done <- srv.ServeTLS(ln, "", "") }()
	select {
	case err := <-done:
		return fmt.Errorf("placement API: %w", err)
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
		<-done
		return nil
	}
}
