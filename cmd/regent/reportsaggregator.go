package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/memlimit"
	"regent.dev/regent/reports/aggregate"
)

// reportsAggregatorQPS and reportsAggregatorBurst are the aggregator's default limits: above
// client-go's fallback (5/s, burst 10), which would queue the writes of a busy cluster's
// namespaces behind each other after a burst of report changes.
const (
	reportsAggregatorQPS   = 50
	reportsAggregatorBurst = 100
)

func newReportsAggregatorCommand() *cobra.Command {
	var kubeconfig, shard, metricsAddr, probeAddr, memoryLimit, leaseNamespace string
	var leaderElect bool
	var limits kubeAPILimits
	a := &aggregate.Aggregator{}
	cmd := &cobra.Command{
		Use:   "reports-aggregator",
		Short: "Merge a cluster's per-resource reports into openreports Reports per namespace and policy",
		Long: "Merge the ResourceReports of every namespace (ClusterResourceReports for the cluster scope)\n" +
			"into openreports.io Reports \"pol-<policy>\"/\"cpol-<policy>\" (ClusterReports), written only\n" +
			"when they change. Run several with --shard 0/n … n-1/n to split a large cluster by namespace.",
		Example: `  # the whole cluster, replicas electing a leader
  regent reports-aggregator --leader-elect --health-probe-bind-address=:8081
  # the second of three shards
  regent reports-aggregator --shard 1/3 --leader-elect`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			sh, err := aggregate.ParseShard(shard)
			if err != nil {
				return err
			}
			a.Shard = sh
			if a.MaxResults < 1 || a.Debounce < 0 {
				return fmt.Errorf("--max-results-per-report must be at least 1 and --debounce not negative")
			}
			limit, err := parseMemoryLimit(memoryLimit)
			if err != nil {
				return err
			}
			memlimit.Apply(cmd.Context(), limit, aggregate.DefaultMemoryLimit)
			if err := limits.check(""); err != nil {
				return err
			}
			cfg, err := loadConfig(cmd.Context(), kubeconfig, limits)
			if err != nil {
				return err
			}
			mgr, err := ctrl.NewManager(cfg, ctrl.Options{
				Scheme:                 scheme.Scheme,
				Metrics:                metricsserver.Options{BindAddress: metricsAddr},
				HealthProbeBindAddress: probeAddr,
				// One Lease per shard: replicas of one shard stand by, different shards run at once.
				LeaderElection:          leaderElect,
				LeaderElectionID:        fmt.Sprintf("regent-reports-aggregator-%d-of-%d", sh.Index, sh.Count),
				LeaderElectionNamespace: leaseNamespace,
				// controller-runtime#3538: the v0.23 priority queue can deadlock at shutdown.
				Controller: config.Controller{UsePriorityQueue: ptr.To(false)},
			})
			if err != nil {
				return err
			}
			if err := a.SetupWithManager(mgr); err != nil {
				return fmt.Errorf("reports aggregator: %w", err)
			}
			if err := addHealthChecks(mgr, probeAddr); err != nil {
				return err
			}
			ctrl.Log.Info("reports aggregator starting", "shard", sh.String(), "debounce", a.Debounce, "maxResultsPerReport", a.MaxResults)
			return mgr.Start(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "cluster kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	f.StringVar(&shard, "shard", "0/1", "i/n: own the namespaces whose hash is i modulo n")
	f.DurationVar(&a.Debounce, "debounce", aggregate.DefaultDebounce, "wait after a namespace's reports change before merging it")
	f.IntVar(&a.MaxResults, "max-results-per-report", aggregate.DefaultMaxResults, "results per Report before it is split into numbered parts")
	f.StringVar(&metricsAddr, "metrics-bind-address", ":8080", "Prometheus metrics address; 0 disables")
	f.StringVar(&probeAddr, "health-probe-bind-address", "", "healthz/readyz address; empty disables")
	f.BoolVar(&leaderElect, "leader-elect", false, "elect one active aggregator per shard among replicas (Lease regent-reports-aggregator-<i>-of-<n>)")
	f.StringVar(&leaseNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: the pod's namespace)")
	f.StringVar(&memoryLimit, "memory-limit", "", "soft Go memory limit (e.g. 64Mi); unset: adaptive, the larger of 32Mi and the live heap plus the runtime's overhead plus max(an eighth of the live heap, a third of 32Mi); negative: none")
	limits.register(f, "", "the apiserver", reportsAggregatorQPS, reportsAggregatorBurst)
	return cmd
}
