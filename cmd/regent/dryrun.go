package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"regent.dev/regent/spoke-addon/configpolicy/dryrun"
)

func newDryrunCommand() *cobra.Command {
	var (
		policyFile string
		output     string
	)
	cmd := &cobra.Command{
		Use:   "dryrun -p <policy.yaml> <objects.yaml|dir|->...",
		Short: "Show what a ConfigurationPolicy would report and change against the given objects",
		Long: `Show what a ConfigurationPolicy would report and change against the given objects, like OCM's
dryrun, without a cluster: the objects (files, directories of files, "-" for stdin; YAML streams
and Lists) make an in-memory cluster and the spoke addon's own ConfigurationPolicy evaluation runs
against it. The policy is a ConfigurationPolicy or an OCM Policy holding one.

Printed: the changes enforcing would make (creates, updates and deletes, as unified diffs), then
OCM's compliance message for the policy evaluated as inform.

Exit code: 0 Compliant, 2 NonCompliant, 1 the policy or the objects could not be read.`,
		Example: `  # A policy against objects exported from a cluster
  kubectl get ns,configmaps -A -o yaml > objects.yaml
  regent dryrun -p policy.yaml objects.yaml

  # The full result (status, message, changes) as JSON
  regent dryrun -p policy.yaml -o json manifests/`,
		Args: cobra.ArbitraryArgs,
		RunE: exitOnNo(func(cmd *cobra.Command, args []string) error {
			if output != "text" && output != "json" {
				return fmt.Errorf("-o %s: want text or json", output)
			}
			doc, err := os.ReadFile(policyFile)
			if err != nil {
				return fmt.Errorf("read policy: %w", err)
			}
			p, err := dryrun.ReadPolicy(doc)
			if err != nil {
				return err
			}
			objects, err := readObjectArgs(cmd, args)
			if err != nil {
				return err
			}
			res, err := dryrun.Run(cmd.Context(), p, objects, time.Now())
			if err != nil {
				return err
			}
			if output == "json" {
				enc := json.NewEncoder(cmd.OutOrStdout())
				enc.SetIndent("", "  ")
				if err := enc.Encode(res); err != nil {
					return err
				}
			} else {
				dryrun.WriteText(cmd.OutOrStdout(), res)
			}
			if !res.Compliant() {
				return answeredNo("policy %s is %s", p.Name, res.Status.ComplianceState)
			}
			return nil
		}),
	}
	cmd.Flags().StringVarP(&policyFile, "policy", "p", "", "the ConfigurationPolicy, or a Policy holding one")
	cmd.Flags().StringVarP(&output, "output", "o", "text", "text or json")
	_ = cmd.MarkFlagRequired("policy")
	return cmd
}

// readObjectArgs reads the objects of files, of the files directly in directories (not deeper,
// as OCM's dryrun), and of stdin for "-".
func readObjectArgs(cmd *cobra.Command, args []string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, arg := range args {
		if arg == "-" {
			objs, err := dryrun.ReadObjects(cmd.InOrStdin())
			if err != nil {
				return nil, fmt.Errorf("stdin: %w", err)
			}
			out = append(out, objs...)
			continue
		}
		files := []string{arg}
		if info, err := os.Stat(arg); err != nil {
			return nil, err
		} else if info.IsDir() {
			entries, err := os.ReadDir(arg)
			if err != nil {
				return nil, err
			}
			files = files[:0]
			for _, e := range entries {
				if !e.IsDir() {
					files = append(files, filepath.Join(arg, e.Name()))
				}
			}
		}
		for _, f := range files {
			fh, err := os.Open(f)
			if err != nil {
				return nil, err
			}
			objs, err := dryrun.ReadObjects(fh)
			fh.Close()
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, objs...)
		}
	}
	return out, nil
}
