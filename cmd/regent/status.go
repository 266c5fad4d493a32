package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/cli/status"
)

// newStatusCommand is `regent status` (a managed cluster's view) with `rollout` and `why` (the
// hub's). Given the root, it also makes the binary a kubectl plugin when installed as
// kubectl-regent (and kubectl_complete-regent for kubectl's completion of plugins).
func newStatusCommand(root *cobra.Command) *cobra.Command {
	asKubectlPlugin(root, filepath.Base(os.Args[0]), os.Args[1:])
	flags := status.NewFlags()
	var output string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show what a managed cluster runs: policies, templates, pending dependencies, admission policies, reports",
		Long: `status, pointed at a managed cluster (its kubeconfig or context), lists the policies the
spoke addon synced with each template's compliance and the dependencies a template waits for,
the admission policies with the generation the webhook serves and each policy-server replica's
readiness, and the summed counts of the cluster's reports.

Its subcommands rollout and why ask the hub.`,
		Example: `  # what the managed cluster of the current context runs
  regent status
  # the same through kubectl, on another context, as JSON
  kubectl regent status --context cluster1 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := status.CheckFormat(output); err != nil {
				return err
			}
			c, err := flags.Client()
			if err != nil {
				return err
			}
			s, err := status.ReadSpoke(cmd.Context(), c)
			if err != nil {
				return err
			}
			return status.Print(cmd.OutOrStdout(), output, s, s.WriteTable)
		},
	}
	flags.AddTo(cmd.PersistentFlags())
	cmd.PersistentFlags().StringVarP(&output, "output", "o", status.Table, "output format: table, json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{status.Table, status.JSON, status.YAML}, cobra.ShellCompDirectiveNoFileComp))
	cmd.AddCommand(newStatusRolloutCommand(flags, &output), newStatusWhyCommand(flags, &output))
	return cmd
}

func newStatusRolloutCommand(flags *status.Flags, output *string) *cobra.Command {
	var watch bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "rollout POLICY",
		Short: "Show a policy's rollout on the hub: clusters by decision group, what each waits for",
		Long: `rollout shows, for a root policy on the hub, every selected cluster by decision group with
its rollout status and compliance, and what the rollout waits for: the soak time left
(minSuccessTime) of a cluster that succeeded, the time before the progress deadline of one still
progressing, and the failure budget (maxFailures) used.

With -w it follows the rollout until it ends: a progress bar per group in a terminal, a plain
line per change otherwise.

Exit codes: 0 when the rollout succeeded, or (without -w) has not failed; 1 when the rollout of
the policy's current generation failed, or on any error; 2 when -w --timeout passed first.`,
		Example: `  # where the rollout of default/require-labels stands
  regent status rollout require-labels -n default
  # follow it until it ends; the exit code says how it ended
  kubectl regent status rollout require-labels -n default -w --timeout 10m`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completePolicies(flags),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := status.CheckFormat(*output); err != nil {
				return err
			}
			c, err := flags.Client()
			if err != nil {
				return err
			}
			ns, err := flags.Namespace()
			if err != nil {
				return err
			}
			if watch {
				if *output != status.Table {
					return fmt.Errorf("-w prints progress; use it without -o %s", *output)
				}
				out := cmd.OutOrStdout()
				return exitCode(status.WatchRollout(cmd.Context(), c, ns, args[0], out, status.WatchOptions{TTY: status.IsTerminal(out), Timeout: timeout}))
			}
			now := time.Now()
			r, err := status.ReadRollout(cmd.Context(), c, ns, args[0], now)
			if err != nil {
				return err
			}
			if err := status.Print(cmd.OutOrStdout(), *output, r, func(w io.Writer) error { return r.WriteTable(w, now) }); err != nil {
				return err
			}
			return status.RolloutResult(r)
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the rollout until it succeeds or fails")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "with -w, give up (exit code 2) after this long; 0 waits forever")
	return cmd
}

func newStatusWhyCommand(flags *status.Flags, output *string) *cobra.Command {
	return &cobra.Command{
		Use:   "why POLICY CLUSTER",
		Short: "Explain, from the hub, where a policy stands on one cluster and why",
		Long: `why answers "why is this cluster where it is?" for a root policy: whether each binding's
placement chose the cluster and in which decision group, its rollout status and what it waits for,
the replicated policy, the declared dependencies and those the cluster reports unmet, each
template's compliance message, and the summary of the cluster's rolled-up report.`,
		Example: `  # why is cluster2 still Pending for default/require-labels?
  regent status why require-labels cluster2 -n default
  kubectl regent status why require-labels cluster2 -n default -o yaml`,
		Args:              cobra.ExactArgs(2),
		ValidArgsFunction: completePolicyThenCluster(flags),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := status.CheckFormat(*output); err != nil {
				return err
			}
			c, err := flags.Client()
			if err != nil {
				return err
			}
			ns, err := flags.Namespace()
			if err != nil {
				return err
			}
			now := time.Now()
			w, err := status.ReadWhy(cmd.Context(), c, ns, args[0], args[1], now)
			if err != nil {
				return err
			}
			return status.Print(cmd.OutOrStdout(), *output, w, func(out io.Writer) error { return w.WriteTable(out, now) })
		},
	}
}

// exitCode ends the process with the code an ExitError carries when it is not main's 1, after
// printing the error as main does; kubectl's commands end the same way.
func exitCode(err error) error {
	var exit *status.ExitError
	if errors.As(err, &exit) && exit.Code != 1 {
		fmt.Fprintln(os.Stderr, "regent:", err)
		os.Exit(exit.Code)
	}
	return err
}

func completePolicies(flags *status.Flags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return completeWith(flags, func(c client.Reader, ns string) ([]string, error) {
			return status.RootPolicyNames(cmd.Context(), c, ns, prefix)
		})
	}
}

func completePolicyThenCluster(flags *status.Flags) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]cobra.Completion, cobra.ShellCompDirective) {
		switch len(args) {
		case 0:
			return completeWith(flags, func(c client.Reader, ns string) ([]string, error) {
				return status.RootPolicyNames(cmd.Context(), c, ns, prefix)
			})
		case 1:
			return completeWith(flags, func(c client.Reader, ns string) ([]string, error) {
				return status.ClusterNames(cmd.Context(), c, ns, args[0], prefix)
			})
		}
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeWith asks the API for names; a cluster that cannot be reached completes nothing rather
// than file names.
func completeWith(flags *status.Flags, names func(client.Reader, string) ([]string, error)) ([]cobra.Completion, cobra.ShellCompDirective) {
	c, err := flags.Client()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	ns, err := flags.Namespace()
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	list, err := names(c, ns)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
	}
	return list, cobra.ShellCompDirectiveNoFileComp
}

// asKubectlPlugin makes the binary answer as `kubectl regent` when kubectl runs it as the plugin
// kubectl-regent: help and completion say so. kubectl completes a plugin's arguments by running
// kubectl_complete-regent with them, which is cobra's hidden __complete command.
func asKubectlPlugin(root *cobra.Command, argv0 string, args []string) {
	switch argv0 {
	case "kubectl-regent":
		root.Annotations = withAnnotation(root.Annotations, cobra.CommandDisplayNameAnnotation, "kubectl regent")
	case "kubectl_complete-regent":
		root.Annotations = withAnnotation(root.Annotations, cobra.CommandDisplayNameAnnotation, "kubectl regent")
		root.SetArgs(append([]string{cobra.ShellCompRequestCmd}, args...))
	}
}

func withAnnotation(a map[string]string, k, v string) map[string]string {
	if a == nil {
		a = map[string]string{}
	}
	a[k] = v
	return a
}
