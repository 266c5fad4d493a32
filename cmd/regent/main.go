// Command regent is Regent's single binary: the hub, the spoke addon and the policy server run as
// its subcommands, beside the user-facing ones such as quickstart.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "regent:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:              "regent",
		Short:            "Regent governs a fleet of Kubernetes clusters from one OCM hub",
		SilenceUsage:     true,
		SilenceErrors:    true,
		PersistentPreRun: func(*cobra.Command, []string) { ctrl.SetLogger(zap.New()) },
	}
	root.AddCommand(newQuickstartCommand(), newHubCommand(), newSpokeAddonCommand(), newPolicyServerCommand(), newReportsAggregatorCommand())
	return root
}
