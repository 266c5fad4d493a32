package main

import (
	"github.com/spf13/cobra"

	spokeaddon "regent.dev/regent/spoke-addon"
)

func newSpokeAddonCommand() *cobra.Command {
	var opts spokeaddon.Options
	var hubKubeconfig, kubeconfig string
	cmd := &cobra.Command{
		Use:   "spoke-addon",
		Short: "Run the addon on a managed cluster: policy sync, templates, ConfigurationPolicy, status",
		RunE: func(cmd *cobra.Command, _ []string) error {
			hubCfg, err := loadConfig(hubKubeconfig)
			if err != nil {
				return err
			}
			localCfg, err := loadConfig(kubeconfig)
			if err != nil {
				return err
			}
			opts.Hub, opts.Local = hubCfg, localCfg
			return spokeaddon.Run(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&hubKubeconfig, "hub-kubeconfig", "", "kubeconfig of the addon's hub identity (required)")
	f.StringVar(&kubeconfig, "kubeconfig", "", "managed cluster kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)")
	f.StringVar(&opts.ClusterName, "cluster-name", "", "this managed cluster's name (required)")
	f.StringVar(&opts.InstallNamespace, "install-namespace", spokeaddon.DefaultInstallNamespace, "namespace of the addon's Lease")
	f.StringVar(&opts.MetricsAddr, "metrics-bind-address", ":8080", "Prometheus metrics address; 0 disables")
	_ = cmd.MarkFlagRequired("hub-kubeconfig")
	_ = cmd.MarkFlagRequired("cluster-name")
	return cmd
}
