package policyserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"

	"github.com/go-logr/logr"

	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/reports/admission"
	"regent.dev/regent/tlsreload"
)

// Options configure a policy server.
type Options struct {
	// Addr is the HTTPS listen address (default ":8443"); Listener, when set, is used instead.
	Addr     string
	Listener net.Listener
	// MetricsAddr is the plain-HTTP address serving /metrics (empty: none); MetricsListener,
	// when set, is used instead. Metrics are never served on the admission listener.
	MetricsAddr     string
	MetricsListener net.Listener
	// CertFile and KeyFile are the serving certificate, reloaded when they change.
	CertFile, KeyFile string
	// PoliciesFile is the policies configuration (see Config); it is re-read every
	// ReloadInterval (default 5s, negative: never) and changes are applied live.
	PoliciesFile   string
	ReloadInterval time.Duration
	// CacheDir keeps compiled modules between restarts (wazero's compilation cache).
	CacheDir string
	// Workers bounds evaluations at once (default GOMAXPROCS); MaxQueue bounds the requests
	// waiting for a worker (default 64 per worker) before the server answers 429.
	Workers, MaxQueue int
	// PolicyWorkers bounds the workers one policy holds at once (default Workers-1, at least 1),
	// so a slow policy always leaves the others a worker. Requests of one policy wait behind
	// those while both PolicyQueue (how many wait, default 1024 per worker) and PolicyQueueWait
	// (how long the one at the back is expected to wait, from the policy's recent evaluation
	// times; default 1s, well within a webhook's timeout; negative: no time bound) allow; beyond
	// either its requests are answered 429 at once.
	PolicyWorkers, PolicyQueue int
	PolicyQueueWait            time.Duration
	// PolicyBorrowLimit lets a policy whose recent evaluations take under an eighth of it use
	// workers beyond PolicyWorkers while they are free; an evaluation on a borrowed worker is cut
	// at this limit and run again in the policy's own share, so no policy holds a borrowed core
	// longer (default DefaultPolicyBorrowLimit; negative: never borrow).
	PolicyBorrowLimit time.Duration
	// MemoryLimitBytes caps each policy instance's memory (default engine.DefaultMemoryLimitBytes).
	MemoryLimitBytes uint64
	// AdmissionReports, when set, makes the answers of monitor-mode policies and of protect-mode
	// policies with reportAdmission into per-resource reports, written off the admission path
	// through its Client (see package reports/admission); nil: no reports. Its Registerer and
	// Logger are the server's.
	AdmissionReports *admission.Options
	// Host serves waPC policies' host capabilities (package capabilities: Kubernetes lookups,
	// registry digests, …); calls are counted in /metrics. Nil serves none, and a policy that
	// calls the host gets an error saying so.
	Host   engine.Host
	Logger logr.Logger
}

func (o Options) withDefaults() Options {
	if o.Addr == "" {
		o.Addr = ":8443"
	}
	if o.ReloadInterval == 0 {
		o.ReloadInterval = 5 * time.Second
	}
	if o.Workers <= 0 {
		o.Workers = runtime.GOMAXPROCS(0)
	}
	if o.MaxQueue <= 0 {
		o.MaxQueue = 64 * o.Workers
	}
	if o.PolicyWorkers <= 0 || o.PolicyWorkers > o.Workers {
		o.PolicyWorkers = max(1, o.Workers-1)
	}
	if o.PolicyQueue <= 0 {
		o.PolicyQueue = 1024 * o.Workers
	}
	if o.PolicyQueueWait == 0 {
		o.PolicyQueueWait = time.Second
	}
	if o.PolicyBorrowLimit == 0 {
		o.PolicyBorrowLimit = DefaultPolicyBorrowLimit
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o
}

// NewServer starts an engine and a server with no policies; Apply loads them. Close releases
// it. Run is the usual way in; NewServer serves tests and embedders.
func NewServer(ctx context.Context, opts Options) (*Server, error) {
	opts = opts.withDefaults()
	m := newMetrics()
	var host engine.Host
	if opts.Host != nil {
		host = meteredHost{next: opts.Host, calls: m.hostCalls}
	}
	e, err := engine.New(ctx, engine.Options{
		CacheDir: opts.CacheDir, MemoryLimitBytes: opts.MemoryLimitBytes,
		MaxInstancesPerPolicy: opts.Workers, Logger: opts.Logger, Host: host,
		OnGuestLogDropped: func(policy string) { m.logsDropped.WithLabelValues(policy).Inc() },
	})
	if err != nil {
		return nil, err
	}
	s := newServer(e, m, concurrency{opts.Workers, opts.MaxQueue, opts.PolicyWorkers, opts.PolicyQueue, opts.PolicyQueueWait, opts.PolicyBorrowLimit}, opts.Logger)
	s.replicator, _ = opts.Host.(InventoryReplicator)
	if err := startAdmissionReports(ctx, opts.AdmissionReports, m, s); err != nil {
		_ = e.Close(ctx)
		return nil, err
	}
	return s, nil
}

// Close unloads every policy and stops the engine.
func (s *Server) Close(ctx context.Context) error {
	s.reports.close()
	s.policies.Close()
	return s.engine.Close(ctx)
}

// Run serves admission requests over HTTPS until ctx is done: it loads the policies file (a
// policy that fails to load is logged and skipped; the server serves the others), then watches
// it. It is the `regent policy-server` command.
func Run(ctx context.Context, opts Options) error {
	opts = opts.withDefaults()
	if opts.CertFile == "" || opts.KeyFile == "" {
		return errors.New("policy server: a certificate and key file are required (admission webhooks are HTTPS only)")
	}
	certs, err := tlsreload.New(opts.CertFile, opts.KeyFile)
	if err != nil {
		return fmt.Errorf("policy server: %w", err)
	}
	s, err := NewServer(ctx, opts)
	if err != nil {
		return fmt.Errorf("policy server: %w", err)
	}
	defer s.Close(context.Background())

	if opts.PoliciesFile != "" {
		cfg, err := ReadConfig(opts.PoliciesFile)
		if err != nil {
			return fmt.Errorf("policy server: %w", err)
		}
		if err := s.Apply(ctx, cfg); err != nil {
			opts.Logger.Error(err, "some policies did not load")
		}
		if opts.ReloadInterval > 0 {
			go s.watchConfig(ctx, opts.PoliciesFile, opts.ReloadInterval)
		}
	}
	s.ready.Store(true) // with no file, nothing to wait for
	go func() {
		if err := ServeMetrics(ctx, opts, s.MetricsHandler()); err != nil {
			opts.Logger.Error(err, "metrics listener stopped; admission keeps serving")
		}
	}()

	ln := opts.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", opts.Addr); err != nil {
			return fmt.Errorf("policy server: listen: %w", err)
		}
	}
	srv := admissionServer(s.Handler(), certs)
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	opts.Logger.Info("policy server listening", "addr", ln.Addr().String(), "policies", len(s.Loaded()))
	select {
	case err := <-errc:
		return fmt.Errorf("policy server: %w", err)
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return srv.Shutdown(shutdown)
}

// watchConfig re-applies the policies file whenever its contents change.
func (s *Server) watchConfig(ctx context.Context, path string, interval time.Duration) {
	last, _ := os.ReadFile(path)
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cur, err := os.ReadFile(path)
		if err != nil || string(cur) == string(last) {
			continue
		}
		last = cur
		cfg, err := ReadConfig(path)
		if err != nil {
			s.log.Error(err, "policies file changed but is invalid; keeping the policies loaded")
			continue
		}
		if err := s.Apply(ctx, cfg); err != nil {
			s.log.Error(err, "some policies did not reload")
		}
	}
}
