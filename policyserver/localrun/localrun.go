package localrun

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"

	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/lifecycle/pull"
)

// Options say which policy to run and how, in the words of a policy server's policies file.
type Options struct {
	// Policy is the policy as a policies.yml entry has it. Its Module may also be a registry://
	// or https:// reference, pulled as a policy revision would be. An empty ExecutionMode is
	// taken from the module's name (see ExecutionModeFor).
	Policy policyserver.PolicyConfig
	// Name is the policy's name in the server's messages; empty takes it from the module's file
	// name.
	Name string
	// Pull configures remote pulls (trusted roots, insecure registries).
	Pull pull.Options
	// Logger receives the server's and the guest's log lines; nil discards them.
	Logger logr.Logger
}

// Runner is a policy loaded into an in-process policy server. Close releases it.
type Runner struct {
	server *policyserver.Server
	name   string
	tmp    string
}

// Result is the server's answer to one review.
type Result struct {
	// Review is the AdmissionReview the server wrote, as kube-apiserver would receive it.
	Review json.RawMessage
	// Response is that review's response.
	Response admissionv1.AdmissionResponse
}

// Load pulls the module if it is remote and loads the policy into a new policy server; every
// error says which of those steps failed (a settings rejection included, as the server reports
// it).
func Load(ctx context.Context, opts Options) (_ *Runner, err error) {
	pc := opts.Policy
	if pc.Module == "" {
		pc.Module = pc.URL
	}
	pc.URL = ""
	if pc.Module == "" {
		return nil, errors.New("no policy module given")
	}
	r := &Runner{name: opts.Name}
	defer func() {
		if err != nil {
			r.Close(context.Background())
		}
	}()
	if strings.Contains(pc.Module, "://") && !strings.HasPrefix(pc.Module, "file://") {
		if r.tmp, err = os.MkdirTemp("", "regent-policy-run-"); err != nil {
			return nil, err
		}
		m, err := pull.Fetch(ctx, pc.Module, opts.Pull)
		if err != nil {
			return nil, err
		}
		local := filepath.Join(r.tmp, filepath.Base(m.Path))
		if err := os.WriteFile(local, m.Bytes, 0o600); err != nil {
			return nil, fmt.Errorf("keep pulled module: %w", err)
		}
		pc.Module = local
	} else {
		pc.Module = strings.TrimPrefix(pc.Module, "file://")
		if pc.Module, err = filepath.Abs(pc.Module); err != nil {
			return nil, err
		}
	}
	if pc.ExecutionMode == "" {
		pc.ExecutionMode = ExecutionModeFor(pc.Module)
	}
	if r.name == "" {
		r.name = nameFor(pc.Module)
	}
	log := opts.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	if r.server, err = policyserver.NewServer(ctx, policyserver.Options{Workers: 1, Logger: log}); err != nil {
		return nil, fmt.Errorf("start policy server: %w", err)
	}
	if err := r.server.Apply(ctx, policyserver.Config{r.name: pc}); err != nil {
		return nil, fmt.Errorf("load policy: %w", err)
	}
	return r, nil
}

// ExecutionModeFor names the runtime a module's file name implies: Rego sources run as opa, a
// YAML file is a Gatekeeper ConstraintTemplate, anything else is a waPC module (Kubewarden's
// default; a WASI or OPA-built .wasm module needs its mode said).
func ExecutionModeFor(module string) string {
	switch strings.ToLower(filepath.Ext(module)) {
	case ".rego":
		return "opa"
	case ".yaml", ".yml":
		return "gatekeeper"
	}
	return ""
}

// nameFor makes a policy name from a module's file name that is a path segment of the
// server's /validate/{policy} route.
func nameFor(module string) string {
	base := strings.TrimSuffix(filepath.Base(module), filepath.Ext(module))
	name := strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-', r == '.':
			return r
		case r >= 'A' && r <= 'Z':
			return r + ('a' - 'A')
		}
		return '-'
	}, base)
	if strings.Trim(name, "-.") == "" {
		return "policy"
	}
	return name
}

// Name is the policy's name as the server knows it.
func (r *Runner) Name() string { return r.name }

// Review sends an AdmissionReview (JSON, admission.k8s.io/v1 or v1beta1) through the server's
// admission handler. A request the server refuses to evaluate (a malformed review) is an error;
// a policy that fails while evaluating is, as on a real server, a denial in the result.
func (r *Runner) Review(ctx context.Context, review []byte) (Result, error) {
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/validate/"+r.name, bytes.NewReader(review))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	r.server.Handler().ServeHTTP(rec, req)
	body := rec.Body.Bytes()
	if rec.Code != http.StatusOK {
		return Result{}, fmt.Errorf("policy server answered %d: %s", rec.Code, strings.TrimSpace(string(body)))
	}
	var out struct {
		Response *admissionv1.AdmissionResponse `json:"response"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Response == nil {
		return Result{}, fmt.Errorf("policy server answered with no AdmissionReview response: %q", body)
	}
	return Result{Review: body, Response: *out.Response}, nil
}

// Close stops the server and removes a pulled module.
func (r *Runner) Close(ctx context.Context) {
	if r.server != nil {
		_ = r.server.Close(ctx)
	}
	if r.tmp != "" {
		_ = os.RemoveAll(r.tmp)
	}
}
