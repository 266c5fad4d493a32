package spokeaddon

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"open-cluster-management.io/addon-framework/pkg/lease"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"regent.dev/regent/addonidentity"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/apiserverwait"
	"regent.dev/regent/reports/aggregate"
	"regent.dev/regent/reports/rollup"
	"regent.dev/regent/spoke-addon/admissionpolicy"
	"regent.dev/regent/spoke-addon/configpolicy"
	"regent.dev/regent/spoke-addon/secretsync"
	"regent.dev/regent/spoke-addon/specsync"
	"regent.dev/regent/spoke-addon/statussync"
	"regent.dev/regent/spoke-addon/templatesync"
)

// AddonName is the OCM addon name: the ClusterManagementAddOn on the hub and the agent's Lease.
const AddonName = addonidentity.AddonName

// DefaultInstallNamespace is where OCM installs addon agents on a managed cluster.
const DefaultInstallNamespace = addonidentity.DefaultInstallNamespace

// Client rate limits used when a configuration sets none. client-go's own fallback (5/s, burst
// 10) made every policy change wait in the client: a change takes several local writes and a
// status write to the hub. The local apiserver is the cluster's own; the hub is shared by the
// whole fleet, so the addon asks less of it.
const (
	DefaultLocalQPS   = 50
	DefaultLocalBurst = 100
	DefaultHubQPS     = 20
	DefaultHubBurst   = 50
)

// LeaderElectionID is the Lease the addon's replicas elect the active one with.
const LeaderElectionID = "regent-spoke-addon"

// Options configure the spoke addon.
type Options struct {
	// Hub is the addon's hub identity; it needs only its cluster namespace. Without a QPS of its
	// own it gets DefaultHubQPS/DefaultHubBurst.
	Hub *rest.Config
	// Local is the managed cluster; DefaultLocalQPS/DefaultLocalBurst without a QPS of its own.
	Local *rest.Config
	// ClusterName is the managed cluster's name and its namespace on the hub and on the cluster.
	ClusterName string
	// InstallNamespace holds the addon's Lease; DefaultInstallNamespace when empty.
	InstallNamespace string
	// MetricsAddr serves /metrics; "0" disables.
	MetricsAddr string
	// LeaderElection makes one replica of the addon active at a time, under the Lease
	// LeaderElectionID in LeaderElectionNamespace (InstallNamespace when empty): a Deployment's
	// rolling update starts the new pod before the old one stops, and two active addons would
	// both write the same templates and statuses.
	LeaderElection          bool
	LeaderElectionNamespace string
	// HealthProbeBindAddress serves /healthz (the process answers) and /readyz (the managed
	// cluster's cache has synced and the hub answers); empty disables.
	HealthProbeBindAddress string
	// ExternalConfigPolicy leaves ConfigurationPolicies to a controller running elsewhere (OCM's
	// config-policy-controller, or a test playing it) instead of Regent's own.
	ExternalConfigPolicy bool
	// ExternalAdmissionPolicy leaves ClusterAdmissionPolicies, AdmissionPolicies and
	// PolicyServers to a controller running elsewhere (a test playing it) instead of Regent's own.
	ExternalAdmissionPolicy bool
	// ExternalReportsAggregator leaves merging per-resource reports into openreports Reports to
	// `regent reports-aggregator` processes (several, sharded, on a large cluster) instead of the
	// aggregator the addon runs for the whole cluster.
	ExternalReportsAggregator bool
	// ReportsRollup bounds the per-policy summaries the addon writes into its cluster namespace
	// on the hub (reports/rollup); zero fields take the defaults.
	ReportsRollup rollup.Limits
	// ReportsRollupDebounce is how long the roll-up waits after a report changed;
	// rollup.DefaultDebounce when zero.
	ReportsRollupDebounce time.Duration
	// Admission configures the admission policy controller (ClusterAdmissionPolicy,
	// AdmissionPolicy, PolicyServer → PolicyRevisions, webhooks, policy-server workloads).
	Admission admissionpolicy.Options
	// Controllers adds controllers that run beside the built-in ones (the ConfigurationPolicy
	// controller, admission policy controllers).
	Controllers []func(ctrl.Manager) error
}

// LocalCacheOptions are the options of the addon's cache of its managed cluster. Managed fields
// are often half of a small object and nothing in the addon reads them; an Update without them
// keeps the server's (the apiserver takes the live object's then).
func LocalCacheOptions() cache.Options {
	return cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
}

// New builds the addon's manager without starting it.
func New(opts Options) (manager.Manager, error) {
	if opts.ClusterName == "" {
		return nil, fmt.Errorf("a cluster name is required")
	}
	if opts.InstallNamespace == "" {
		opts.InstallNamespace = DefaultInstallNamespace
	}
	if opts.MetricsAddr == "" {
		opts.MetricsAddr = "0"
	}
	if opts.LeaderElectionNamespace == "" {
		opts.LeaderElectionNamespace = opts.InstallNamespace
	}
	opts.Local = withRateLimit(opts.Local, DefaultLocalQPS, DefaultLocalBurst)
	opts.Hub = withRateLimit(opts.Hub, DefaultHubQPS, DefaultHubBurst)
	mgr, err := ctrl.NewManager(opts.Local, ctrl.Options{
		Scheme:                 scheme.Scheme,
		Metrics:                metricsserver.Options{BindAddress: opts.MetricsAddr},
		HealthProbeBindAddress: opts.HealthProbeBindAddress,
		LeaderElection:         opts.LeaderElection,
		LeaderElectionID:       LeaderElectionID,
		// Not the Lease named AddonName beside it: that one is OCM's health signal of the addon.
		LeaderElectionNamespace: opts.LeaderElectionNamespace,
		// A replica that stops hands over at once instead of after the Lease's duration.
		LeaderElectionReleaseOnCancel: true,
		// A process may build the addon more than once (tests run several addons in-process).
		// The priority queue (controller-runtime's default) can deadlock at shutdown in v0.23:
		// kubernetes-sigs/controller-runtime#3538. No controller here sets priorities.
		Controller: config.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(false)},
		// Template and dependency objects are read through the watches that wake their policies,
		// so a read never sees older state than the event that caused it.
		Client: client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Cache:  LocalCacheOptions(),
	})
	if err != nil {
		return nil, err
	}
	hub, err := cluster.New(opts.Hub, func(o *cluster.Options) {
		o.Scheme = scheme.Scheme
		o.Cache.DefaultNamespaces = map[string]cache.Config{opts.ClusterName: {}}
		o.Cache.DefaultTransform = cache.TransformStripManagedFields()
	})
	if err != nil {
		return nil, fmt.Errorf("hub client: %w", err)
	}
	if err := mgr.Add(hub); err != nil {
		return nil, err
	}
	if opts.HealthProbeBindAddress != "" {
		if err := addProbes(mgr, hub, opts.ClusterName); err != nil {
			return nil, err
		}
	}
	setups := []func() error{
		func() error {
			return (&specsync.Reconciler{Hub: hub.GetCache(), Local: mgr.GetClient(),
				Recorder: mgr.GetEventRecorderFor("regent-specsync")}).SetupWithManager(mgr, hub, opts.ClusterName)
		},
		func() error {
			return (&templatesync.Reconciler{Client: mgr.GetClient(), ClusterNamespace: opts.ClusterName,
				Recorder: mgr.GetEventRecorderFor("regent-templatesync")}).SetupWithManager(mgr)
		},
		func() error {
			return (&secretsync.Reconciler{Hub: opts.Hub, Local: mgr.GetClient(), LocalReader: mgr.GetAPIReader(),
				Namespace: opts.ClusterName, Recorder: mgr.GetEventRecorderFor("regent-secretsync")}).SetupWithManager(mgr)
		},
		func() error {
			return (&statussync.Reconciler{Local: mgr.GetClient(), HubReader: hub.GetCache(), HubWriter: hub.GetClient()}).
				SetupWithManager(mgr, hub, opts.ClusterName)
		},
	}
	setups = append(setups, func() error {
		return (&rollup.Rollup{ClusterName: opts.ClusterName, Limits: opts.ReportsRollup, Debounce: opts.ReportsRollupDebounce}).
			SetupWithManager(mgr, hub)
	})
	if opts.Admission.Namespace == "" {
		opts.Admission.Namespace = admissionpolicy.DefaultNamespace
	}
	if !opts.ExternalAdmissionPolicy {
		setups = append(setups, func() error { return admissionpolicy.SetupWithManager(mgr, opts.Admission) })
	}
	if !opts.ExternalConfigPolicy {
		setups = append(setups, func() error { return configpolicy.SetupWithManager(mgr, configpolicy.Options{}) })
	}
	// ConfigurationPolicy results feed the per-resource reports whichever controller evaluates them.
	setups = append(setups, func() error { return configpolicy.SetupReportFeed(mgr) })
	if !opts.ExternalReportsAggregator {
		setups = append(setups, func() error { return (&aggregate.Aggregator{}).SetupWithManager(mgr) })
	}
	for _, add := range opts.Controllers {
		setups = append(setups, func() error { return add(mgr) })
	}
	for _, setup := range setups {
		if err := setup(); err != nil {
			return nil, err
		}
	}
	kube, err := kubernetes.NewForConfig(opts.Local)
	if err != nil {
		return nil, err
	}
	// The cluster namespace holds the policy copies and their templates; the install namespace the
	// Lease. OCM's agent creates both on a real cluster; a bare one needs them here.
	for _, ns := range []string{opts.ClusterName, opts.InstallNamespace, opts.Admission.Namespace} {
		if err := ensureNamespace(context.Background(), kube, ns); err != nil {
			return nil, err
		}
	}
	updater := lease.NewLeaseUpdater(kube, AddonName, opts.InstallNamespace)
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		updater.Start(ctx)
		return nil
	})); err != nil {
		return nil, err
	}
	return mgr, nil
}

// Run runs the addon until ctx ends.
func Run(ctx context.Context, opts Options) error {
	// Setup asks the managed cluster for its API groups, and a manager that cannot ask exits: in a
	// pod that starts before the cluster's Service IP routes, wait instead of crash-looping.
	log := ctrl.Log.WithName("spoke-addon")
	if err := apiserverwait.Reachable(ctx, opts.Local, "managed cluster", log); err != nil {
		return err
	}
	mgr, err := New(opts)
	if err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// withRateLimit returns cfg with qps and burst when it sets no QPS; cfg itself is not changed.
func withRateLimit(cfg *rest.Config, qps float32, burst int) *rest.Config {
	if cfg == nil || cfg.QPS != 0 {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = qps, burst
	return cfg
}

func ensureNamespace(ctx context.Context, kube kubernetes.Interface, name string) error {
	_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", name, err)
	}
	return nil
}
