package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/apiserverwait"
	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/capabilities"
	"regent.dev/regent/policyserver/lifecycle/cache"
	"regent.dev/regent/policyserver/lifecycle/pull"
	"regent.dev/regent/policyserver/lifecycle/signing"
	"regent.dev/regent/policyserver/registry"
	"regent.dev/regent/policyserver/signatures"
	"regent.dev/regent/reports/background"
)

// Options configure a policy-server replica driven by PolicyRevisions.
type Options struct {
	// Config reaches the apiserver holding the revisions.
	Config *rest.Config
	// LeaderConfig is the identity the leader reads the signing key Secret with: the
	// PolicyServer's leader ServiceAccount, which alone may get it (nil: Config, for an admin
	// kubeconfig). Without it, a leader that is refused the key reports SignError.
	LeaderConfig *rest.Config
	// Namespace holds the revisions, the Leases and the signing Secret (default regent-system).
	Namespace string
	// PolicyServer is the PolicyServer this replica belongs to (default "default"); only its
	// revisions (label kubewarden.io/policy-server) are served.
	PolicyServer string
	// Role is the part of the lifecycle this process plays (default RoleAll): see Role.
	Role Role
	// Replica is this replica's number, reported on Ready conditions and its Lease (not used by
	// RoleLeader).
	Replica int
	// SharedCache is a directory every replica shares (an RWX volume in a cluster): the
	// leader publishes signed entries there and replicas open them in place.
	SharedCache string
	// SignedCache is this replica's own directory of signed entries (an emptyDir or a
	// ReadWriteOnce volume in a cluster), instead of SharedCache: the leader publishes there,
	// and every other replica fetches what it lacks from the leader (transfer.go) and verifies
	// it before it keeps it. Exactly one of SharedCache and SignedCache is set.
	SignedCache string
	// AdvertiseAddress is the host:port other replicas reach this one's listener at (its pod
	// IP), written on its replica Lease; without it, no replica can fetch entries from this one
	// while it leads, and they compile for themselves.
	AdvertiseAddress string
	// PeerCAFile is the CA bundle the leader's serving certificate must chain to, and
	// PeerServerName the name it must be issued for (the Service's DNS name: the leader is
	// reached at its pod IP). Both or neither; with neither, a replica fetching from the leader
	// does not authenticate it (the entries are still signed and the requests authorized).
	PeerCAFile, PeerServerName string
	// Version names this build in the shared cache (default cache.DefaultVersion()).
	Version string
	// Server configures serving; Server.CacheDir is the replica's private compilation cache
	// (default a directory under os.TempDir()). Server.PoliciesFile must be empty. A nil
	// Server.Host gets host capabilities that read the cluster through Config and pull from
	// registries with Pull's CAs.
	Server policyserver.Options
	// Pull configures module pulls (CAs for https and registries).
	Pull pull.Options
	// Verification, when set, is the PolicyServer's verificationConfig: the leader initializes
	// only modules whose signatures meet it (Pull.Verifier is set to it), and replicas serve only
	// revisions verified against it.
	Verification *signatures.Config
	// SigstoreTrust is the PolicyServer's sigstoreTrustConfig: the trust root of policies' keyless
	// verification requests (Verification carries its own). Nil refuses them.
	SigstoreTrust *signatures.TrustRoot
	// Background runs the background scan of reports while this replica leads (nil: none);
	// Config, Namespace, PolicyServer, Registerer and Logger are filled in from these options.
	Background *background.Options
	// LeaseDuration, RenewDeadline and RetryPeriod tune leader election (15s, 10s, 2s); the
	// replica Lease lasts LeaseDuration and is renewed every RetryPeriod.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// ResyncInterval is how often the replica and the leader look again without an event
	// (default 30s); RetryInterval how long a failure waits before it is retried (default 30s).
	ResyncInterval, RetryInterval time.Duration
	// MaxPreparationAttempts bounds the attempts to prepare a revision that end without an
	// outcome, as when its module crashes or OOM-kills the leader (default 3).
	MaxPreparationAttempts int32
	Clock                  clock.Clock
	Logger                 logr.Logger

	// leaderWait is how long a replica without a shared cache waits for a leader to fetch an
	// entry from before it compiles the module itself (default: two Lease durations and two
	// retries, an election and a rebuild).
	leaderWait time.Duration

	// keepLeaseOnStop leaves the leader and replica Leases held when ctx ends, as a crashed
	// process would: tests use it to kill a replica.
	keepLeaseOnStop bool
}

// verifiedWith is the fingerprint a revision must have been verified under: "" without a
// verificationConfig.
func (o Options) verifiedWith() string {
	if o.Verification == nil {
		return ""
	}
	return o.Verification.Fingerprint()
}

// cacheRoot is the directory of signed entries, and whether other replicas see it too.
func (o Options) cacheRoot() (string, bool) {
	if o.SharedCache != "" {
		return o.SharedCache, true
	}
	return o.SignedCache, false
}

// DefaultQPS and DefaultBurst limit a replica's requests to its apiserver when Config sets no
// limit of its own.
const (
	DefaultQPS   = 50
	DefaultBurst = 100
)

func (o Options) withDefaults() (Options, error) {
	if o.Config == nil {
		return o, errors.New("policy server lifecycle: no apiserver configuration")
	}
	if (o.SharedCache == "") == (o.SignedCache == "") {
		return o, errors.New("policy server lifecycle: exactly one of a shared cache directory and a replica's own signed cache directory is required")
	}
	if (o.PeerCAFile == "") != (o.PeerServerName == "") {
		return o, errors.New("policy server lifecycle: the leader's CA bundle and the name its certificate is issued for go together")
	}
	if o.Pull.Timeout <= 0 {
		o.Pull.Timeout = 2 * time.Minute
	}
	if o.Pull.MaxBytes <= 0 {
		o.Pull.MaxBytes = pull.DefaultMaxModuleBytes
	}
	if o.Verification != nil {
		o.Pull.Verifier = o.Verification
	}
	if o.Server.PoliciesFile != "" {
		return o, errors.New("policy server lifecycle: policies come from PolicyRevisions, not a policies file")
	}
	if o.Replica < 0 {
		return o, fmt.Errorf("policy server lifecycle: replica %d is negative", o.Replica)
	}
	role, err := ParseRole(string(o.Role))
	if err != nil {
		return o, fmt.Errorf("policy server lifecycle: %w", err)
	}
	o.Role = role
	if o.Namespace == "" {
		o.Namespace = "regent-system"
	}
	if o.Config.QPS == 0 {
		// client-go's fallback (5/s, burst 10) would queue a replica's Ready reports behind each
		// other when many revisions load at once.
		o.Config = rest.CopyConfig(o.Config)
		o.Config.QPS, o.Config.Burst = DefaultQPS, DefaultBurst
	}
	if o.PolicyServer == "" {
		o.PolicyServer = "default"
	}
	if o.Version == "" {
		o.Version = cache.DefaultVersion()
	}
	if o.Server.CacheDir == "" {
		o.Server.CacheDir = filepath.Join(os.TempDir(), fmt.Sprintf("regent-policy-server-%s-%s", o.PolicyServer, o.holderName()))
	}
	defaultDuration(&o.LeaseDuration, 15*time.Second)
	defaultDuration(&o.RenewDeadline, 10*time.Second)
	defaultDuration(&o.RetryPeriod, 2*time.Second)
	defaultDuration(&o.ResyncInterval, 30*time.Second)
	defaultDuration(&o.RetryInterval, 30*time.Second)
	defaultDuration(&o.leaderWait, 2*o.LeaseDuration+2*o.RetryInterval)
	if o.MaxPreparationAttempts <= 0 {
		o.MaxPreparationAttempts = 3
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	if o.Role == RoleLeader {
		o.Logger = o.Logger.WithValues("policyServer", o.PolicyServer, "role", o.Role)
	} else {
		o.Logger = o.Logger.WithValues("policyServer", o.PolicyServer, "replica", o.Replica, "role", o.Role)
	}
	o.Server.Logger = o.Logger
	return o, nil
}

func defaultDuration(d *time.Duration, def time.Duration) {
	if *d <= 0 {
		*d = def
	}
}

// Run is one process of a policy server. As a replica (RoleAll, RoleReplica) it serves
// admission requests over HTTPS for every enabled, Initialized revision, reports Ready on each
// and renews its replica Lease. Unless it is RoleReplica it campaigns for the leader Lease,
// leading while it holds it; a RoleLeader process serves only the signed entries and probes. It
// returns when ctx is done, or at once when it cannot start; no policy error makes it return.
func Run(ctx context.Context, opts Options) error {
	opts, err := opts.withDefaults()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := os.MkdirAll(opts.Server.CacheDir, 0o755); err != nil {
		return fmt.Errorf("policy server lifecycle: private cache: %w", err)
	}
	// Its informers ask for API groups first; a pod that starts before the Service IP routes
	// would exit and restart. It waits instead.
	if err := apiserverwait.Reachable(ctx, opts.Config, "cluster", opts.Logger); err != nil {
		return fmt.Errorf("policy server lifecycle: %w", err)
	}
	kube, err := kubernetes.NewForConfig(opts.Config)
	if err != nil {
		return fmt.Errorf("policy server lifecycle: %w", err)
	}
	api, err := client.New(opts.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return fmt.Errorf("policy server lifecycle: %w", err)
	}
	if opts.Server.Host == nil {
		if opts.Server.Host, err = capabilities.New(capabilities.Options{
			Kubernetes: opts.Config, RegistryCAs: opts.Pull.CAs, InsecureRegistries: opts.Pull.InsecureRegistries,
			Sigstore: opts.SigstoreTrust, Clock: opts.Clock, Logger: opts.Logger.WithName("policy"),
		}); err != nil {
			return fmt.Errorf("policy server lifecycle: %w", err)
		}
	}
	informers, err := crcache.New(opts.Config, crcache.Options{
		Scheme:            scheme.Scheme,
		DefaultNamespaces: map[string]crcache.Config{opts.Namespace: {}},
		ByObject: map[client.Object]crcache.ByObject{
			&kubewardenv1.PolicyRevision{}: {
				Label: labels.SelectorFromSet(labels.Set{kubewardenv1.PolicyServerLabel: opts.PolicyServer}),
			},
			// Only this server's signing Secret: its arrival is what unblocks a leader that
			// started before the controller issued it.
			&corev1.Secret{}: {Field: fields.OneTermEqualSelector("metadata.name", signing.SecretName(opts.PolicyServer))},
		},
	})
	if err != nil {
		return fmt.Errorf("policy server lifecycle: %w", err)
	}
	if opts.Server.AdmissionReports, err = withReportSources(ctx, opts.Server.AdmissionReports, opts.Config); err != nil {
		return fmt.Errorf("policy server lifecycle: %w", err)
	}
	server, err := policyserver.NewServer(ctx, opts.Server)
	if err != nil {
		return fmt.Errorf("policy server lifecycle: %w", err)
	}
	defer server.Close(context.Background())

	root, shared := opts.cacheRoot()
	transfers := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regent_policy_server_cache_transfers_total",
		Help: "Signed cache entries this replica fetched from its leader, by result: verified (kept), refused (tampered, truncated or malformed: dropped and fetched again), failed (the leader could not be asked).",
	}, []string{"result"})
	if err := server.Registerer().Register(transfers); err != nil {
		return fmt.Errorf("policy server lifecycle: %w", err)
	}
	identity := electionIdentity(opts)
	rep := &replica{
		opts: opts, number: int32(opts.Replica), identity: identity, server: server, reader: informers, api: api,
		status: statusWriter{client: api, clock: opts.Clock},
		cache:  cache.Cache{Root: root, Version: opts.Version}, shared: shared, privateDir: opts.Server.CacheDir,
		log: opts.Logger.WithName("replica"), loaded: map[registry.Key]served{}, failed: map[types.UID]time.Time{},
		files: newPrivateFiles(opts.Server.CacheDir), waitingSince: map[types.UID]time.Time{},
		transfers: transfers, transferClient: newTransferClient(opts),
	}
	replicaPokes, leaderPokes := make(chan struct{}, 1), make(chan struct{}, 1)
	var ldr *leader
	if opts.Role.campaigns() {
		if ldr, err = newLeader(ctx, opts, informers, api, func() { nudge(leaderPokes) }); err != nil {
			return fmt.Errorf("policy server lifecycle: %w", err)
		}
		defer ldr.close()
		rep.leader = ldr
	}

	poke := func(any) { nudge(replicaPokes); nudge(leaderPokes) }
	inf, err := informers.GetInformer(ctx, &kubewardenv1.PolicyRevision{})
	if err != nil {
		return fmt.Errorf("policy server lifecycle: %w", err)
	}
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, o any) { poke(o) },
	}); err != nil {
		return fmt.Errorf("policy server lifecycle: %w", err)
	}
	secrets, err := informers.GetInformer(ctx, &corev1.Secret{})
	if err != nil {
		return fmt.Errorf("policy server lifecycle: %w", err)
	}
	if ldr != nil {
		keysChanged := func(any) { ldr.keysChanged.Store(true); poke(nil) }
		if _, err := secrets.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc: keysChanged, UpdateFunc: func(_, o any) { keysChanged(o) },
		}); err != nil {
			return fmt.Errorf("policy server lifecycle: %w", err)
		}
	}
	// Every goroutine ends before Run returns, so nothing outlives the replica (or logs after it).
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	wg.Go(func() { _ = informers.Start(ctx) })
	if !informers.WaitForCacheSync(ctx) {
		return fmt.Errorf("policy server lifecycle: revisions never synced: %w", ctx.Err())
	}

	if opts.Role.servesReplica() {
		wg.Go(func() { renewReplicaLease(ctx, opts, kube) })
	}
	wg.Go(func() {
		if err := policyserver.ServeMetrics(ctx, opts.Server, server.MetricsHandler()); err != nil {
			opts.Logger.Error(err, "metrics listener stopped; admission keeps serving")
		}
	})
	if opts.Role.servesReplica() || opts.Background != nil {
		// The leader workload loads revisions too, without reporting them, when it runs the
		// background scan: the scan evaluates through this process's server.
		wg.Go(func() { loop(ctx, replicaPokes, opts.ResyncInterval, rep.sync, rep.log) })
	}
	if ldr != nil {
		wg.Go(func() {
			err := elect(ctx, opts, kube, identity, func(ctx context.Context) {
				ldr.leading.Store(true)
				defer ldr.leading.Store(false)
				ldr.clearStaging()
				nudge(leaderPokes)
				if opts.Role == RoleLeader {
					var lw sync.WaitGroup
					defer lw.Wait()
					lw.Go(func() { renewLeaderAddress(ctx, opts, kube, identity) })
				}
				defer runBackgroundScan(ctx, opts, server)()
				loop(ctx, leaderPokes, opts.ResyncInterval, ldr.sync, ldr.log)
			})
			if err != nil {
				opts.Logger.Error(err, "leader election stopped; this process keeps serving")
			}
		})
	}
	if opts.Role == RoleLeader {
		return policyserver.ServeTLS(ctx, opts.Server, leaderHandler(rep, &ldr.leading))
	}
	return policyserver.ServeTLS(ctx, opts.Server, rep.handler())
}

// nudge asks a loop for a pass; pending requests coalesce into one.
func nudge(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// loop runs sync now, on every nudge and every resync, until ctx is done.
func loop(ctx context.Context, pokes <-chan struct{}, resync time.Duration, sync func(context.Context) error, log logr.Logger) {
	t := time.NewTicker(resync)
	defer t.Stop()
	for {
		if err := sync(ctx); err != nil && ctx.Err() == nil {
			log.Error(err, "sync failed; retrying on the next change or resync")
		}
		select {
		case <-ctx.Done():
			return
		case <-pokes:
		case <-t.C:
		}
	}
}
