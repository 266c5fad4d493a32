package main

import (
	"github.com/spf13/cobra"

	"regent.dev/regent/quickstart"
)

func newQuickstartCommand() *cobra.Command {
	var opts quickstart.Options
	cmd := &cobra.Command{
		Use:   "quickstart",
		Short: "Start a local fleet (a hub and three managed clusters) and keep it up until Ctrl-C",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Out = cmd.OutOrStdout()
			return quickstart.Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.BinDir, "bin-dir", "", "folder with kube-apiserver, etcd, kube-controller-manager (default: the `make testbin` cache)")
	cmd.Flags().DurationVar(&opts.Lifetime, "lifetime", 0, "stop by itself after this long (0: run until interrupted)")
	cmd.Flags().StringVar(&opts.TestbinScript, "testbin-script", "hack/testbin.sh", "script that builds missing binaries")
	return cmd
}
