// Command regent is Regent's single binary: the hub, the spoke addon and the policy server run as
// its subcommands, beside the user-facing ones such as quickstart.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
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
	// controller-runtime's zap flags (--zap-log-level, --zap-encoder, …) on every subcommand, as
	// operators built with controller-runtime have them.
	logOpts := zap.Options{}
	logFlags := flag.NewFlagSet("log", flag.ContinueOnError)
	logOpts.BindFlags(logFlags)
	root := &cobra.Command{
		Use:   "regent",
		Short: "Regent governs a fleet of Kubernetes clusters from one OCM hub",
		Example: `  # a local fleet to try Regent on: a hub and three managed clusters
  regent quickstart
  # where a policy's rollout stands, from the hub
  regent status rollout sample-namespace -n policies
  # a policy evaluated as the policy server would, before it ships
  regent policy run -p policy.wasm -r review.json`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRun: func(cmd *cobra.Command, _ []string) {
			logger := zap.New(zap.UseFlagOptions(&logOpts))
			ctrl.SetLogger(logger)
			// client-go and the apiserver libraries log through klog: the same sink, the
			// same format.
			klog.SetLogger(logger)
			if !isTool(cmd) {
				v := currentVersion()
				logger.Info("regent starting", "command", cmd.Name(), "version", v.Version, "revision", v.Revision, "go", v.GoVersion)
			}
		},
	}
	root.PersistentFlags().AddGoFlagSet(logFlags)
	root.AddCommand(newQuickstartCommand(), newHubCommand(), newSpokeAddonCommand(), newPolicyServerCommand(), newReportsAggregatorCommand(), newVersionCommand())
	root.AddCommand(tool(newPolicyCommand()), tool(newVerifyCommand()), tool(newDryrunCommand()))
	root.AddCommand(tool(newStatusCommand(root)))
	addHelpAndCompletion(root)
	return root
}

// toolAnnotation marks a command a person runs and reads (version, status, policy, …), as opposed
// to a long-running component: its output is for the user, so it logs no start line.
const toolAnnotation = "regent.dev/tool"

// tool marks cmd as a tool command and returns it.
func tool(cmd *cobra.Command) *cobra.Command {
	if cmd.Annotations == nil {
		cmd.Annotations = map[string]string{}
	}
	cmd.Annotations[toolAnnotation] = "true"
	return cmd
}

// isTool reports whether cmd or one of its parents is a tool command.
func isTool(cmd *cobra.Command) bool {
	for c := cmd; c != nil; c = c.Parent() {
		if c.Annotations[toolAnnotation] == "true" {
			return true
		}
	}
	return false
}
