package bench

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/memlimit"
	"regent.dev/regent/reports/aggregate"
	spokeaddon "regent.dev/regent/spoke-addon"
	"regent.dev/regent/spoke-addon/configpolicy"
	"regent.dev/regent/spoke-addon/templatesync"
	"regent.dev/regent/test/benchproc"
)

// Environment of the child process.
const (
	envMode    = "REGENT_BENCH_SPOKE_MODE" // "addon" or "floor"
	envReports = "REGENT_BENCH_REPORTS"
)

// TestSpokeProcess is the child of the benchmark; run without its environment it does nothing.
//
// Mode "addon" runs the addon's policy side as spokeaddon.New assembles it on the managed
// cluster: templatesync for the cluster namespace and the ConfigurationPolicy controller on a
// manager with the addon's client options (unstructured objects through the cache, the addon's
// QPS), plus the report feed and aggregator when REGENT_BENCH_REPORTS=1. Spec and status sync
// are left out: they talk to the hub, which is not what is measured here.
//
// Mode "floor" is the peer: an informer cache of the same kinds and nothing else, to show what
// holding the objects costs before any policy logic runs.
func TestSpokeProcess(t *testing.T) {
	env, ok := benchproc.Child(t)
	if !ok {
		return
	}
	cfg, ctx := env.Config, env.Context
	cfg.QPS, cfg.Burst = spokeaddon.DefaultLocalQPS, spokeaddon.DefaultLocalBurst
	// The addon runs without a memory limit. REGENT_BENCH_MEMORY_LIMIT=0 measures it with the
	// hub's adaptive one (64 MiB floor), a positive value with a fixed one.
	if v := os.Getenv("REGENT_BENCH_MEMORY_LIMIT"); v != "" {
		limit, _ := strconv.ParseInt(v, 10, 64)
		memlimit.Apply(ctx, limit, 64<<20)
	}
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme.Scheme,
		Metrics:    metricsserver.Options{BindAddress: env.MetricsAddr},
		Controller: config.Controller{SkipNameValidation: &skip, UsePriorityQueue: new(bool)}, // no priority queue: controller-runtime#3538
		Client:     client.Options{Cache: &client.CacheOptions{Unstructured: true}},
		Cache:      spokeaddon.LocalCacheOptions(),
	})
	if err != nil {
		t.Fatal(err)
	}
	switch os.Getenv(envMode) {
	case "floor":
		if err := mgr.Add(floor{cache: mgr.GetCache()}); err != nil {
			t.Fatal(err)
		}
	default:
		setups := []func() error{
			func() error {
				return (&templatesync.Reconciler{Client: mgr.GetClient(), ClusterNamespace: clusterNamespace,
					Recorder: mgr.GetEventRecorderFor("regent-templatesync")}).SetupWithManager(mgr)
			},
			func() error { return configpolicy.SetupWithManager(mgr, configpolicy.Options{}) },
		}
		if os.Getenv(envReports) == "1" {
			setups = append(setups,
				func() error { return configpolicy.SetupReportFeed(mgr) },
				func() error { return (&aggregate.Aggregator{}).SetupWithManager(mgr) })
		}
		for _, setup := range setups {
			if err := setup(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := mgr.Start(ctx); err != nil {
		t.Fatal(err)
	}
	benchproc.WriteHeapProfile(t)
}

// floor starts an informer per kind the workload names, as the addon's cache does, and prints
// how long they took to sync.
type floor struct{ cache cache.Cache }

func (f floor) Start(ctx context.Context) error {
	began := time.Now()
	for _, gvk := range workloadKinds {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		if _, err := f.cache.GetInformer(ctx, u); err != nil {
			return err
		}
	}
	if !f.cache.WaitForCacheSync(ctx) {
		return fmt.Errorf("cache did not sync")
	}
	fmt.Fprintf(os.Stderr, "floor: %d informers synced in %.2fs\n", len(workloadKinds), time.Since(began).Seconds())
	<-ctx.Done()
	return nil
}

// workloadKinds are the kinds the workload's policies name, and the policies' own.
var workloadKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "ConfigMap"},
	{Version: "v1", Kind: "Secret"},
	{Version: "v1", Kind: "ServiceAccount"},
	{Version: "v1", Kind: "Namespace"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "Policy"},
	{Group: "policy.open-cluster-management.io", Version: "v1", Kind: "ConfigurationPolicy"},
}
