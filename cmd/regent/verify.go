package main

import (
	"encoding/json"
	"fmt"

	"github.com/spf13/cobra"

	"regent.dev/regent/policyserver/lifecycle/pull"
	"regent.dev/regent/policyserver/verify"
)

func newVerifyCommand() *cobra.Command {
	var (
		verbose  bool
		output   string
		insecure bool
	)
	cmd := &cobra.Command{
		Use:   "verify <dir|file>...",
		Short: "Run policy test suites: Gatekeeper gator suites and Regent PolicyTest files",
		Long: `Run every policy test suite under the directories given (recursively) or named:
Gatekeeper's gator suites (suite.yaml, kind Suite) unchanged, as gator verify runs them, and
Regent's PolicyTest files (kind PolicyTest, regent.dev/v1alpha1; see docs/cli-author.md) for
Kubewarden waPC/WASI modules, Rego and templates alike. Policies run as the policy server runs
them. A gator case's inventory files are its data.inventory, as Gatekeeper replicates cluster
state, so referential templates run too. Cases and tests marked skip: true are skipped and say
so. Each suite prints its outcome and time as it finishes.

Exit code: 0 every case passed or was skipped, 2 a case failed or a suite could not run, 1 no
suite was found or read.`,
		Example: `  # Gatekeeper library suites, unchanged
  regent verify gatekeeper-library/library

  # Everything under policies/, every case listed
  regent verify -v policies/

  # The report as JSON for CI
  regent verify -o json policies/ > report.json`,
		Args: cobra.MinimumNArgs(1),
		RunE: exitOnNo(func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %s: want text or json", output)
			}
			files, err := verify.Discover(args)
			if err != nil {
				return err
			}
			if len(files) == 0 {
				return fmt.Errorf("no gator Suite or PolicyTest file under %v", args)
			}
			w := cmd.OutOrStdout()
			var onSuite func(verify.Suite)
			if output == "text" {
				onSuite = func(s verify.Suite) { verify.WriteSuite(w, s, verbose) }
			}
			report, err := verify.Run(cmd.Context(), files, verify.Options{Pull: pull.Options{InsecureRegistries: insecure}}, onSuite)
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(w)
				enc.SetIndent("", "  ")
				if err := enc.Encode(report); err != nil {
					return err
				}
			} else {
				verify.WriteSummary(w, report)
			}
			if report.Failed() {
				return answeredNo("verify failed")
			}
			return nil
		}),
	}
	cmd.Flags().BoolVarP(&verbose, "verbose", "v", false, "list passing cases too")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	cmd.Flags().BoolVar(&insecure, "insecure-registry", false, "pull registry:// modules of PolicyTests over plain http")
	return cmd
}
