package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"

	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/lifecycle/pull"
	"regent.dev/regent/policyserver/localrun"
)

func newPolicyRunCommand() *cobra.Command {
	var (
		pc       policyserver.PolicyConfig
		request  string
		settings string
		name     string
		timeout  time.Duration
		insecure bool
		mode     string
	)
	cmd := &cobra.Command{
		Use:   "run --policy <module> --request <review>",
		Short: "Evaluate an admission request with a policy exactly as the policy server would",
		Long: `Evaluate an admission request with a policy exactly as the policy server would, like kwctl run:
the policy is loaded into an in-process policy server (the same engine and runtimes) and the request
goes through its admission handler. The AdmissionReview it answers with is printed on stdout.

The policy is a waPC (default), WASI or OPA-built .wasm module, a .rego file (opa), or a Gatekeeper
ConstraintTemplate .yaml (gatekeeper), as a path or a registry:// or https:// reference. The
request is an AdmissionReview, its request, or a plain object (reviewed as a CREATE); "-" reads
stdin. Settings are a file or inline JSON/YAML; a Gatekeeper constraint gives its parameters.

Exit code: 0 allowed (mutations included), 2 rejected, 1 the policy could not be loaded or the
request read.`,
		Example: `  # A Rego policy against a pod
  regent policy run --policy require-team-label.rego --request pod.yaml

  # A Gatekeeper template with its constraint as settings
  regent policy run -p template.yaml --settings constraint.yaml -r review.json

  # A Kubewarden module from a registry, allowed to mutate
  regent policy run -p registry://ghcr.io/kubewarden/policies/safe-labels:v1.0.0 \
    --settings '{"mandatory_labels": ["team"]}' --mutating -r review.json`,
		Args: cobra.NoArgs,
		RunE: exitOnNo(func(cmd *cobra.Command, _ []string) error {
			doc, err := readInput(cmd, request)
			if err != nil {
				return fmt.Errorf("read request: %w", err)
			}
			review, err := localrun.ReviewOf(doc)
			if err != nil {
				return err
			}
			if pc.Settings, err = settingsFlag(settings); err != nil {
				return err
			}
			pc.Mode = policyserver.PolicyMode(mode)
			pc.TimeoutSeconds = int64(timeout / time.Second)
			r, err := localrun.Load(cmd.Context(), localrun.Options{
				Policy: pc, Name: name, Pull: pull.Options{InsecureRegistries: insecure},
				Logger: debugLogger("policy"),
			})
			if err != nil {
				return err
			}
			defer r.Close(cmd.Context())
			res, err := r.Review(cmd.Context(), review)
			if err != nil {
				return err
			}
			if err := printJSON(cmd.OutOrStdout(), res.Review); err != nil {
				return err
			}
			if !res.Response.Allowed {
				msg := ""
				if res.Response.Result != nil {
					msg = res.Response.Result.Message
				}
				return answeredNo("rejected by policy %s: %s", r.Name(), msg)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVarP(&pc.Module, "policy", "p", "", "the policy: a .wasm, .rego or ConstraintTemplate .yaml path, or a registry:// or https:// reference")
	f.StringVarP(&request, "request", "r", "", `the AdmissionReview, its request or an object to review (JSON or YAML; "-" for stdin)`)
	f.StringVarP(&settings, "settings", "s", "", "the policy's settings: a file, or inline JSON/YAML")
	f.StringVar(&pc.ExecutionMode, "execution-mode", "", "kubewarden-wapc, wasi, opa or gatekeeper (default: from the module's file name)")
	f.StringVar(&mode, "mode", "protect", "protect, or monitor (always admits, as the server does)")
	f.BoolVar(&pc.Mutating, "mutating", false, "the policy may mutate the request (a mutation is otherwise a denial)")
	f.StringVar(&pc.Entrypoint, "entrypoint", "", "the Rego rule an opa policy evaluates (default policy/main)")
	f.StringVar(&pc.RegoVersion, "rego-version", "", "v0 or v1 for Rego sources (default v1; v0 for templates)")
	f.StringVar(&pc.Message, "message", "", "replace every rejection's message, keeping the policy's as a cause")
	f.StringVar(&name, "name", "", "the policy's name in messages (default: from the module's file name)")
	f.DurationVar(&timeout, "timeout", 0, "bound on one evaluation, in whole seconds (default the server's)")
	f.BoolVar(&insecure, "insecure-registry", false, "pull registry:// modules over plain http")
	_ = cmd.MarkFlagRequired("policy")
	_ = cmd.MarkFlagRequired("request")
	return cmd
}

// debugLogger is the log of the server a tool runs in process: its lines (policy loaded, the
// guest's own logging, the error the command reports anyway) are for --zap-log-level=debug only,
// since what the tool prints is its answer.
func debugLogger(name string) logr.Logger {
	if ctrl.Log.V(1).Enabled() {
		return ctrl.Log.WithName(name)
	}
	return logr.Discard()
}

// readInput reads a file, or stdin for "-".
func readInput(cmd *cobra.Command, path string) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(cmd.InOrStdin())
	}
	return os.ReadFile(path)
}

// settingsFlag takes inline JSON or YAML when the value cannot be a file name, a file otherwise.
func settingsFlag(v string) (json.RawMessage, error) {
	if v == "" {
		return nil, nil
	}
	doc := []byte(v)
	if t := strings.TrimSpace(v); !strings.HasPrefix(t, "{") && !strings.Contains(t, "\n") && !strings.Contains(t, ": ") {
		b, err := os.ReadFile(v)
		if err != nil {
			return nil, fmt.Errorf("read settings: %w", err)
		}
		doc = b
	}
	return localrun.Settings(doc)
}

// printJSON prints a JSON document indented, for a person reading it.
func printJSON(w io.Writer, doc []byte) error {
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
