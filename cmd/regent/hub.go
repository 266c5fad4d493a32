package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"

	"regent.dev/regent/hub"
	"regent.dev/regent/hub/addon"
	"regent.dev/regent/hub/propagator"
	"regent.dev/regent/placement/opa"
)

func newHubCommand() *cobra.Command {
	var opts hub.Options
	var kubeconfig, addonImage, memoryLimit, maxReplicated string
	var addonManager, dashboardOn bool
	var placement opa.Options
	var placementInventory []string
	var limits kubeAPILimits
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Run the hub: propagation, progressive rollout, status aggregation",
		Example: `  # against the hub of the current kubeconfig context, alone
  regent hub
  # as deploy/hub runs it: replicas electing a leader, health probes on :8081
  regent hub --leader-elect --leader-election-namespace=regent-system --health-probe-bind-address=:8081
  # with the placement query API, its webhook and the fleet dashboard on :8443
  regent hub --placement-api-addr=:8443 --placement-api-cert-file=tls.crt --placement-api-key-file=tls.key`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := limits.check(""); err != nil {
				return err
			}
			// The propagator, the addon manager and the placement engine share the limits.
			cfg, err := loadConfig(cmd.Context(), kubeconfig, limits)
			if err != nil {
				return err
			}
			opts.Config, opts.QPS, opts.Burst = cfg, limits.QPS, limits.Burst
			if opts.MemoryLimit, err = parseMemoryLimit(memoryLimit); err != nil {
				return err
			}
			if maxReplicated != "" {
				q, err := resource.ParseQuantity(maxReplicated)
				if err != nil {
					return fmt.Errorf("--max-replicated-bytes: %w", err)
				}
				opts.MaxReplicatedBytes = q.Value()
			}
			for _, r := range placementInventory {
				gvr, err := opa.ParseGVR(r)
				if err != nil {
					return fmt.Errorf("--placement-inventory: %w", err)
				}
				placement.Inventory = append(placement.Inventory, gvr)
			}
			runHub := func(ctx context.Context) error { return hub.Run(ctx, opts) }
			if dashboardOn && placement.Addr == "" && cmd.Flags().Changed("dashboard") {
				return errors.New("--dashboard is served on --placement-api-addr, which is empty")
			}
			if dashboardOn && placement.Addr != "" {
				if runHub, err = withDashboard(cfg, opts, &placement); err != nil {
					return err
				}
			}
			g, ctx := errgroup.WithContext(cmd.Context())
			g.Go(func() error { return runHub(ctx) })
			if addonManager {
				g.Go(func() error {
					return addon.Run(ctx, cfg, addon.Options{Image: addonImage,
						LeaderElection: opts.LeaderElection, LeaderElectionNamespace: opts.LeaderElectionNamespace})
				})
			}
			placement.Admission.LeaderElection = opts.LeaderElection
			placement.Admission.LeaderElectionNamespace = opts.LeaderElectionNamespace
			if placement.Addr != "" {
				g.Go(func() error { return opa.Run(ctx, cfg, placement) })
			}
			return g.Wait()
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "hub kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	f.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", ":8080", "Prometheus metrics address; 0 disables")
	f.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", "", "healthz/readyz address; empty disables")
	limits.register(f, "", "the hub apiserver", hub.DefaultQPS, hub.DefaultBurst)
	deprecatedAlias(f, "qps", "kube-api-qps")
	deprecatedAlias(f, "burst", "kube-api-burst")
	f.IntVar(&opts.Workers, "workers", hub.DefaultWorkers, "writes one root policy's reconcile issues at once; also root policies reconciled at once unless --concurrent-roots is set")
	f.IntVar(&opts.ConcurrentRoots, "concurrent-roots", 0, "root policies reconciled at once; 0: --workers")
	f.DurationVar(&opts.RootStatusInterval, "root-status-interval", propagator.DefaultStatusInterval, "how long a rollout in progress may hold clusters' answers and turns (which its replicas carry) back from its root policy's status, so a 3,000-cluster root is written about once an interval; at least this, it grows by 10ms per cluster of every root whose rollout progresses up to 1m, and past that by 2ms per cluster up to 5m (2m at 60,000 progressing clusters); failures, the rollout's end, a success while a soak time counts and a turn while a progress deadline counts are written at once; negative: write every change at once")
	f.BoolVar(&opts.LeaderElection, "leader-elect", false, "elect one active hub among replicas")
	f.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease")
	f.StringVar(&memoryLimit, "memory-limit", "", "soft Go memory limit (e.g. 64Mi); unset: adaptive, the larger of 48Mi and the live heap plus the runtime's overhead plus max(an eighth of the live heap, 16Mi), at most 85% of the container's memory limit; negative: none")
	f.StringVar(&maxReplicated, "max-replicated-bytes", "", "cap on one root policy's replicas in etcd, serialized replica × selected clusters (e.g. 256Mi); unset: 128Mi; negative: none")
	f.BoolVar(&addonManager, "addon-manager", true, "register Regent as the OCM addon \"regent\" and deliver its agent to clusters that enable it")
	f.StringVar(&addonImage, "addon-image", addon.DefaultImage, "image of the spoke addon delivered to managed clusters")
	f.StringVar(&placement.Addr, "placement-api-addr", "", "HTTPS address of the placement query API (OPA's POST/GET /v1/data/<path>); empty disables the placement engine")
	f.StringVar(&placement.CertFile, "placement-api-cert-file", "", "serving certificate of --placement-api-addr (query API, webhook, dashboard), re-read when it changes")
	f.StringVar(&placement.KeyFile, "placement-api-key-file", "", "serving key of --placement-api-addr")
	f.StringVar(&placement.Namespace, "placement-policy-namespace", "regent-system", "namespace of the ConfigMaps labelled regent.dev/placement-policy=rego")
	f.StringVar(&placement.Admission.Package, "placement-admission-package", opa.DefaultAdmissionPackage, "Rego package whose document answers for each Placement (errors, annotations, requiredClusterSelector, predicates); the webhook is served at "+opa.AdmissionPath+" on --placement-api-addr")
	f.DurationVar(&placement.Admission.Budget, "placement-admission-budget", opa.DefaultAdmissionBudget, "time one Placement admission may take, retries of transient errors included; keep it under the webhook's timeoutSeconds")
	f.BoolVar(&placement.Admission.Disabled, "placement-admission-disabled", false, "serve no Placement webhook and run no remediator (the query API only)")
	f.BoolVar(&placement.Admission.DryRun, "placement-remediation-dry-run", false, "the remediator only reports (Events PlacementWouldRemediate, log, regent_placement_remediations_total) what it would change on Placements")
	f.BoolVar(&dashboardOn, "dashboard", true, "serve the read-only fleet dashboard at /dashboard/ on --placement-api-addr, to users who may get the non-resource URL /dashboard (docs/dashboard.md)")
	f.StringArrayVar(&placementInventory, "placement-inventory", nil, "group/version/resource replicated into the placement engine besides ManagedClusters, ManagedClusterSets(Bindings) and AddOnPlacementScores (core group: /v1/namespaces); repeatable")
	return cmd
}
