package hub

import (
	"context"
	"errors"
	"fmt"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/selection"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
	"regent.dev/regent/apiserverwait"
	"regent.dev/regent/eventnote"
	"regent.dev/regent/hub/policyset"
	"regent.dev/regent/hub/propagator"
	"regent.dev/regent/hub/rollout"
	"regent.dev/regent/memlimit"
)

// scheme holds the kinds the hub reads and writes.
var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(corev1.AddToScheme(s))
	utilruntime.Must(clusterv1beta1.Install(s))
	utilruntime.Must(policyv1.AddToScheme(s))
	utilruntime.Must(policyv1beta1.AddToScheme(s))
	utilruntime.Must(openreportsv1alpha1.AddToScheme(s))
	return s
}()

// Run runs the hub until ctx ends.
func Run(ctx context.Context, opts Options) error {
	if opts.Config == nil {
		return errors.New("hub: no rest config for the hub apiserver")
	}
	memlimit.Apply(ctx, opts.MemoryLimit, DefaultMemoryLimit)
	if err := apiserverwait.Reachable(ctx, opts.Config, "hub", ctrl.Log.WithName("hub")); err != nil {
		return err
	}
	mgr, err := NewManager(opts.Config, opts)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// Manager is the hub's controller-runtime manager with the cache of its replicas beside its own.
type Manager struct {
	manager.Manager
	// Replicas holds the replicas, as propagator.CachedReplica; the manager's cache holds every
	// other Policy. Started and synced with the manager's cache.
	Replicas cache.Cache
}

// NewManager returns the hub's manager, not started. cfg is copied; opts.Config is ignored.
func NewManager(cfg *rest.Config, opts Options) (*Manager, error) {
	opts = opts.withDefaults()
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst
	// Its cache is the manager's, set below; the metrics server reads it only once started.
	governance := &governanceMetrics{registry: ctrlmetrics.Registry}
	// Both read the informers' stores, known once the manager is.
	unchangedPolicies, unchangedReplicas, unchangedReports := &unchangedObjects{}, &unchangedObjects{}, &unchangedObjects{}
	// Each cache watches on a connection of its own, apart from the writes (watchConnection).
	cacheConn, err := watchConnection(cfg)
	if err != nil {
		return nil, err
	}
	replicaConn, err := watchConnection(cfg)
	if err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: opts.MetricsBindAddress, FilterProvider: governance.filterProvider},
		HealthProbeBindAddress:  opts.HealthProbeBindAddress,
		LeaderElection:          opts.LeaderElection,
		LeaderElectionID:        "regent-hub",
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// The priority queue (controller-runtime's default) can deadlock at shutdown in v0.23:
		// kubernetes-sigs/controller-runtime#3538. The hub's queues hold roots, a few hundred at
		// most, so ordering the initial list last buys little.
		Controller: config.Controller{UsePriorityQueue: ptr.To(false)},
		// Managed fields are half of a replica's size and the hub never reads them.
		Cache: cache.Options{
			HTTPClient:       cacheConn,
			DefaultTransform: cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				// Replicas are in their own cache (below), as CachedReplicas.
				&policyv1.Policy{}:            {Label: rootsOnly, Transform: unchangedPolicies.transform(trimPolicy)},
				&openreportsv1alpha1.Report{}: {Transform: unchangedReports.transform(trimReport)},
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("hub manager: %w", err)
	}
	replicas, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: scheme, Mapper: mgr.GetRESTMapper(), HTTPClient: replicaConn,
		ByObject: map[client.Object]cache.ByObject{
			&policyv1.Policy{}: {Label: replicasOnly, Transform: unchangedReplicas.transform(cacheReplica)},
		}})
	if err != nil {
		return nil, fmt.Errorf("replica cache: %w", err)
	}
	if err := mgr.Add(startedWithCaches{replicas}); err != nil {
		return nil, fmt.Errorf("replica cache: %w", err)
	}
	// Its own rate limiter at QPS/Burst, as the typed client keeps one per kind.
	writer, err := propagator.NewReplicaWriter(mgr.GetConfig(), mgr.GetHTTPClient(), serializer.NewCodecFactory(scheme))
	if err != nil {
		return nil, err
	}
	r := &propagator.Reconciler{
		Client:   mgr.GetClient(),
		Writer:   writer,
		Reader:   mgr.GetCache(),
		Replicas: replicas,
		// The encryption key Secrets of hub templates, read by name and never cached.
		APIReader: mgr.GetAPIReader(),
		Planner:   rollout.NewPlanner(opts.Clock),
		Recorder:  eventnote.Capped(mgr.GetEventRecorder("regent-hub")),
		Workers:   opts.Workers,
		// Negative (no cap) stays negative: the reconciler caps only when positive.
		MaxReplicatedBytes: opts.MaxReplicatedBytes,
		StatusInterval:     opts.RootStatusInterval,
	}
	if err := r.SetupWithManager(context.Background(), mgr, opts.ConcurrentRoots); err != nil {
		return nil, fmt.Errorf("propagator: %w", err)
	}
	sets := &policyset.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetCache(), Recorder: eventnote.Capped(mgr.GetEventRecorder("regent-hub"))}
	if err := sets.SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("policy sets: %w", err)
	}
	governance.cache, governance.replicas, governance.log = mgr.GetCache(), replicas, mgr.GetLogger()
	if err := reserveGovernanceInfo(ctrlmetrics.Registry); err != nil {
		return nil, fmt.Errorf("policy_governance_info: %w", err)
	}
	watchUnchanged := func(u *unchangedObjects, c cache.Cache, obj client.Object) error {
		inf, err := c.GetInformer(context.Background(), obj)
		if err != nil {
			return fmt.Errorf("%T informer: %w", obj, err)
		}
		u.watch(inf)
		return nil
	}
	if err := errors.Join(watchUnchanged(unchangedPolicies, mgr.GetCache(), &policyv1.Policy{}),
		watchUnchanged(unchangedReplicas, replicas, &policyv1.Policy{}),
		watchUnchanged(unchangedReports, mgr.GetCache(), &openreportsv1alpha1.Report{})); err != nil {
		return nil, err
	}
	if opts.HealthProbeBindAddress != "" {
		if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
		if err := mgr.AddReadyzCheck("ping", healthz.Ping); err != nil {
			return nil, err
		}
	}
	return &Manager{Manager: mgr, Replicas: replicas}, nil
}

// Which Policies are replicas: those with the root-policy label (propagator's isReplica).
var (
	replicasOnly = labels.NewSelector().Add(must(labels.NewRequirement(propagator.RootPolicyLabel, selection.Exists, nil)))
	rootsOnly    = labels.NewSelector().Add(must(labels.NewRequirement(propagator.RootPolicyLabel, selection.DoesNotExist, nil)))
)

func must[T any](v *T, err error) T {
	utilruntime.Must(err)
	return *v
}

// startedWithCaches has the manager start a cache of the hub's own with its caches, and wait for
// it to sync before any controller starts, leader or not (the dashboard and the governance
// metrics read it on every replica of the hub).
type startedWithCaches struct{ cache.Cache }

func (c startedWithCaches) GetCache() cache.Cache { return c.Cache }
