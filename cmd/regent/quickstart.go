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
		Example: `  # from a clone of the repository, after make testbin
  regent quickstart
  # binaries from another folder; stop by itself after an hour
  regent quickstart --bin-dir ~/testbin --lifetime 1h`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Out = cmd.OutOrStdout()
			if !cmd.Flags().Changed("testbin-script") {
				opts.TestbinScript = quickstart.FindTestbinScript()
			}
			return quickstart.Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.BinDir, "bin-dir", "", "folder with kube-apiserver, etcd, kube-controller-manager (default: the cache make testbin fills)")
	cmd.Flags().DurationVar(&opts.Lifetime, "lifetime", 0, "stop by itself after this long (0: run until interrupted)")
	cmd.Flags().StringVar(&opts.TestbinScript, "testbin-script", "", "script that builds missing binaries; empty: build none (default: the clone's hack/testbin.sh, from the working directory or beside bin/regent)")
	// Tests start the quickstart with --testbin-script= so that a missing binary fails at once
	// instead of starting a build of minutes; a user has make testbin or the default.
	_ = cmd.Flags().MarkHidden("testbin-script")
	cmd.Flags().BoolVar(&opts.RealNode, "real-node", false, "give "+quickstart.RealNodeCluster+" a real node (root, containerd, runc, CNI plugins, a static regent binary) and show a pod running on it and a privileged one refused")
	// The real node's pod sandboxes and demo pod run this binary as their process.
	cmd.AddCommand(&cobra.Command{Use: "pause", Hidden: true, Args: cobra.NoArgs,
		Run: func(*cobra.Command, []string) { quickstart.Pause() }})
	return cmd
}
