package main

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"regent.dev/regent/reports/rollup"
	spokeaddon "regent.dev/regent/spoke-addon"
	"regent.dev/regent/spoke-addon/admissionpolicy"
)

func newSpokeAddonCommand() *cobra.Command {
	var opts spokeaddon.Options
	var hubKubeconfig, kubeconfig, policyServerURL, policyServerCA string
	var local, hub kubeAPILimits
	cmd := &cobra.Command{
		Use:   "spoke-addon",
		Short: "Run the addon on a managed cluster: policy sync, templates, ConfigurationPolicy, status",
		Example: `  # as the hub's addon manager delivers it to managed cluster cluster1
  regent spoke-addon --hub-kubeconfig=/var/run/hub/kubeconfig --cluster-name=cluster1 \
    --leader-elect --health-probe-bind-address=:8081`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := errors.Join(local.check(""), hub.check("hub-")); err != nil {
				return err
			}
			hubCfg, err := loadConfig(cmd.Context(), hubKubeconfig, hub)
			if err != nil {
				return fmt.Errorf("--hub-kubeconfig: %w", err)
			}
			localCfg, err := loadConfig(cmd.Context(), kubeconfig, local)
			if err != nil {
				return err
			}
			opts.Hub, opts.Local = hubCfg, localCfg
			if policyServerURL != "" {
				opts.Admission.WebhookURL = func(string) string { return policyServerURL }
			}
			if policyServerCA != "" {
				opts.Admission.CABundle = func(context.Context, string) ([]byte, error) { return os.ReadFile(policyServerCA) }
			}
			return spokeaddon.Run(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&hubKubeconfig, "hub-kubeconfig", "", "kubeconfig of the addon's hub identity (required)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "managed cluster kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	f.StringVar(&opts.ClusterName, "cluster-name", "", "this managed cluster's name (required)")
	f.StringVar(&opts.InstallNamespace, "install-namespace", spokeaddon.DefaultInstallNamespace, "namespace of the addon's Lease")
	f.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", "Prometheus metrics address; 0 disables")
	f.BoolVar(&opts.LeaderElection, "leader-elect", false, "elect one active addon among replicas (the delivered Deployment sets it)")
	f.StringVar(&opts.LeaderElectionNamespace, "leader-election-namespace", "", "namespace of the leader election Lease (default: --install-namespace)")
	f.StringVar(&opts.HealthProbeBindAddress, "health-probe-bind-address", "", "healthz/readyz address; empty disables")
	f.BoolVar(&opts.ExternalReportsAggregator, "external-reports-aggregator", false, "leave report aggregation to 'regent reports-aggregator' processes (e.g. sharded) instead of running it here")
	f.IntVar(&opts.ReportsRollup.MaxResults, "rollup-max-results", rollup.DefaultMaxResults, "worst results (fail, error, warn) a policy's summary on the hub names")
	f.IntVar(&opts.ReportsRollup.MaxBytes, "rollup-max-bytes", rollup.DefaultMaxBytes, "bound on the serialised results of a policy's summary on the hub")
	f.StringVar(&opts.Admission.Namespace, "admission-namespace", admissionpolicy.DefaultNamespace, "namespace of PolicyRevisions, policy-server Leases and workloads")
	f.StringVar(&opts.Admission.PolicyServerImage, "policy-server-image", "", "Regent's policy server image, run by a PolicyServer that names Kubewarden's policy-server image (default: this version's regent image)")
	f.StringVar(&policyServerURL, "policy-server-url", "", "base URL webhooks call instead of the policy server's Service (policy servers outside the cluster, as in the local fleet)")
	f.StringVar(&policyServerCA, "policy-server-ca", "", "PEM CA of the policy servers' serving certificate, with --policy-server-url")
	// The local fleet's (quickstart, tests) way to reach policy servers that run as processes; a
	// cluster reaches them through their Service.
	_ = f.MarkHidden("policy-server-url")
	_ = f.MarkHidden("policy-server-ca")
	local.register(f, "", "the managed cluster's apiserver", spokeaddon.DefaultLocalQPS, spokeaddon.DefaultLocalBurst)
	hub.register(f, "hub-", "the hub apiserver", spokeaddon.DefaultHubQPS, spokeaddon.DefaultHubBurst)
	_ = cmd.MarkFlagRequired("hub-kubeconfig")
	_ = cmd.MarkFlagRequired("cluster-name")
	return cmd
}
