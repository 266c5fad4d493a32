package main

import (
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"regent.dev/regent/policyserver"
)

func newPolicyServerCommand() *cobra.Command {
	var opts policyserver.Options
	cmd := &cobra.Command{
		Use:   "policy-server",
		Short: "Serve admission requests with WebAssembly policies (waPC, WASI, OPA, Gatekeeper)",
		RunE: func(cmd *cobra.Command, _ []string) error {
			opts.Logger = ctrl.Log.WithName("policy-server")
			return policyserver.Run(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Addr, "addr", ":8443", "HTTPS listen address")
	f.StringVar(&opts.CertFile, "cert-file", "", "serving certificate (reloaded when it changes)")
	f.StringVar(&opts.KeyFile, "key-file", "", "serving key")
	f.StringVar(&opts.PoliciesFile, "policies", "", "policies configuration file (applied live when it changes)")
	f.StringVar(&opts.CacheDir, "cache-dir", "", "compilation cache folder, kept across restarts")
	f.IntVar(&opts.Workers, "workers", 0, "evaluations at once (default: cores)")
	return cmd
}
