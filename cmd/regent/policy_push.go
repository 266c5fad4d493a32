package main

import (
	"crypto"
	"fmt"
	"os"
	"path/filepath"

	"github.com/sigstore/sigstore/pkg/signature"
	"github.com/spf13/cobra"

	"regent.dev/regent/policyserver/artifact"
)

func newPolicyPushCommand() *cobra.Command {
	var (
		key      string
		insecure bool
	)
	cmd := &cobra.Command{
		Use:   "push <module.wasm> <registry/repository:tag>",
		Short: "Push a policy module to an OCI registry in the layout the policy server pulls",
		Long: `Push a wasm policy module to an OCI registry as a wasm artifact (config
application/vnd.wasm.config.v1+json, one application/vnd.wasm.content.layer.v1+wasm layer), the
layout the policy server and Kubewarden's tools pull. Credentials come from the Docker config, as
for docker and cosign. With --key, the pushed digest is signed as cosign signs it; the key's
password, if it has one, comes from COSIGN_PASSWORD.

Printed: the pushed reference pinned by digest, to use as registry://<it> in a policy.`,
		Example: `  regent policy push policy.wasm ghcr.io/acme/policies/require-labels:v1.0.0

  # Signed; verify with: cosign verify --key cosign.pub <printed reference>
  COSIGN_PASSWORD=... regent policy push policy.wasm ghcr.io/acme/policies/require-labels:v1.0.0 --key cosign.key`,
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			module, err := os.ReadFile(args[0])
			if err != nil {
				return err
			}
			opts := artifact.Options{Insecure: insecure}
			var signer signature.Signer
			if key != "" {
				// The key first: a wrong password should not leave an unsigned push behind.
				pemKey, err := os.ReadFile(key)
				if err != nil {
					return err
				}
				if signer, err = artifact.LoadPrivateKey(pemKey, []byte(os.Getenv("COSIGN_PASSWORD"))); err != nil {
					return fmt.Errorf("key %s: %w", key, err)
				}
			}
			digest, err := artifact.Push(cmd.Context(), module, filepath.Base(args[0]), args[1], opts)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), digest.String())
			if signer != nil {
				tag, err := artifact.Sign(cmd.Context(), digest, signer, opts)
				if err != nil {
					return err
				}
				fmt.Fprintln(cmd.ErrOrStderr(), "signed:", tag.String())
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&key, "key", "", "sign the pushed digest with this cosign private key")
	cmd.Flags().BoolVar(&insecure, "insecure-registry", false, "use plain http for the registry")
	return cmd
}

func newPolicyPullCommand() *cobra.Command {
	var (
		out      string
		key      string
		insecure bool
	)
	cmd := &cobra.Command{
		Use:   "pull <registry/repository:tag|@digest> -o <file>",
		Short: "Pull a policy module from an OCI registry as the policy server pulls it",
		Long: `Pull a policy module from an OCI registry with the policy server's own pull (the wasm
layer of a Kubewarden-style artifact, or the only layer of one that names none) and write it to a
file. With --key, the artifact's cosign signature is verified against that public key first, and
the module is pulled by the digest that was verified.`,
		Example: `  regent policy pull ghcr.io/acme/policies/require-labels:v1.0.0 -o policy.wasm

  # Only if signed with the key
  regent policy pull ghcr.io/acme/policies/require-labels:v1.0.0 -o policy.wasm --key cosign.pub`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts := artifact.Options{Insecure: insecure}
			ref := args[0]
			if key != "" {
				verifier, err := signature.LoadVerifierFromPEMFile(key, crypto.SHA256)
				if err != nil {
					return fmt.Errorf("key %s: %w", key, err)
				}
				digest, err := artifact.Resolve(cmd.Context(), ref, opts)
				if err != nil {
					return err
				}
				if err := artifact.Verify(cmd.Context(), digest, verifier, opts); err != nil {
					return err
				}
				ref = digest.String()
				fmt.Fprintln(cmd.ErrOrStderr(), "verified:", ref)
			}
			m, err := artifact.Pull(cmd.Context(), ref, opts)
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, m.Bytes, 0o644); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s %s\n", m.Digest, out)
			return nil
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "the file to write the module to")
	cmd.Flags().StringVar(&key, "key", "", "verify the artifact's cosign signature with this public key first")
	cmd.Flags().BoolVar(&insecure, "insecure-registry", false, "use plain http for the registry")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}
