package main

import "github.com/spf13/cobra"

// newPolicyCommand groups what a policy author does with one admission policy: run it locally,
// and push it to or pull it from a registry.
func newPolicyCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "Work with one admission policy: run it locally, push it to and pull it from an OCI registry",
		Example: `  regent policy run -p policy.wasm -r review.json
  regent policy push policy.wasm ghcr.io/acme/policies/team:v1 --key cosign.key
  regent policy pull ghcr.io/acme/policies/team:v1 -o policy.wasm --key cosign.pub`,
	}
	cmd.AddCommand(newPolicyRunCommand(), newPolicyPushCommand(), newPolicyPullCommand())
	return cmd
}
