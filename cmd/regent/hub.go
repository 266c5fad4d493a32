package main

import (
	"github.com/spf13/cobra"

	"regent.dev/regent/hub"
)

func newHubCommand() *cobra.Command {
	var opts hub.Options
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Run the hub: propagation, progressive rollout, status aggregation",
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(kubeconfig)
			if err != nil {
				return err
			}
			opts.Config = cfg
			return hub.Run(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "hub kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	f.StringVar(&opts.MetricsBindAddress, "metrics-bind-address", ":8080", "Prometheus metrics address; 0 disables")
	f.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", "", "healthz/readyz address; empty disables")
	f.Float32Var(&opts.QPS, "qps", hub.DefaultQPS, "requests per second to the hub apiserver")
	f.IntVar(&opts.Burst, "burst", hub.DefaultBurst, "request burst to the hub apiserver")
	f.IntVar(&opts.Workers, "workers", hub.DefaultWorkers, "root policies reconciled at once")
	f.BoolVar(&opts.LeaderElection, "leader-elect", false, "elect one active hub among replicas")
	f.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease")
	return cmd
}
