package policyserver

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/reports"
)

// PolicyMode is Kubewarden's policy mode: protect enforces the answer, monitor always admits
// and only records what the answer would have been.
type PolicyMode string

const (
	ModeProtect PolicyMode = "protect"
	ModeMonitor PolicyMode = "monitor"
)

// PolicyConfig is one policy of the configuration file. Kubewarden's policies.yml spellings
// (url, policyMode, allowedToMutate, timeoutEvalSeconds) are accepted too, so existing files
// work unchanged.
type PolicyConfig struct {
	// Module is a file path (relative paths are relative to the configuration file, file://
	// allowed): a .wasm module, a .rego file (compiled in process; opa mode) or a Gatekeeper
	// ConstraintTemplate .yaml (compiled in process; gatekeeper mode).
	Module        string          `json:"module,omitempty"`
	URL           string          `json:"url,omitempty"`
	ExecutionMode string          `json:"executionMode,omitempty"`
	Settings      json.RawMessage `json:"settings,omitempty"`
	Mode          PolicyMode      `json:"mode,omitempty"`
	PolicyMode    PolicyMode      `json:"policyMode,omitempty"`
	Mutating      bool            `json:"mutating,omitempty"`
	// AllowedToMutate is Kubewarden's name for Mutating.
	AllowedToMutate    bool  `json:"allowedToMutate,omitempty"`
	TimeoutSeconds     int64 `json:"timeoutSeconds,omitempty"`
	TimeoutEvalSeconds int64 `json:"timeoutEvalSeconds,omitempty"`
	// Entrypoint is the Rego rule an opa policy evaluates (default policy/main).
	Entrypoint string `json:"entrypoint,omitempty"`
	// RegoVersion is v0 or v1 for Rego sources; default v1, except v0 for Gatekeeper templates
	// (whose library is written in v0).
	RegoVersion string `json:"regoVersion,omitempty"`
	// ContextAwareResources are the kinds the policy may read from the cluster through host
	// capabilities ([{apiVersion, kind}], as in Kubewarden); a lookup of any other kind fails.
	ContextAwareResources []kubewardenv1.ContextAwareResource `json:"contextAwareResources,omitempty"`
	// AllowNetworkBuiltins serves an opa or gatekeeper policy the Rego built-ins that reach the
	// network (http.send, net.lookup_ip_addr, …); without it a policy that calls one fails to
	// load. Policy revisions set it only for ClusterAdmissionPolicies that ask for it.
	AllowNetworkBuiltins bool `json:"allowNetworkBuiltins,omitempty"`
	// ReportAdmission reports a protect-mode policy's answers as per-resource reports, as a
	// monitor-mode policy's always are (when the server writes reports at all).
	ReportAdmission bool `json:"reportAdmission,omitempty"`
	// Message, when set, replaces the message of every rejection in protect mode; the policy's
	// own message is kept as a cause in the response's status.details (Kubewarden's `message`).
	Message string `json:"message,omitempty"`
	// ReportAs is the policy the answers are reported under: a revision's ClusterAdmissionPolicy
	// or AdmissionPolicy. Unset, a policy of a file is a cluster-wide policy named as in the file.
	ReportAs *reports.PolicyRef `json:"-"`

	// Policies, Expression: a policy group (Kubewarden's policy groups): the members by name,
	// each configured as a policy, and the CEL expression calling them that decides. The group's
	// Message is its rejection message; Module and the fields about one module are unused.
	Policies   map[string]PolicyConfig `json:"policies,omitempty"`
	Expression string                  `json:"expression,omitempty"`
}

// isGroup tells a policy group from a policy.
func (p PolicyConfig) isGroup() bool { return p.Expression != "" || len(p.Policies) > 0 }

// Config maps policy names to their configuration.
type Config map[string]PolicyConfig

// ReadConfig parses a YAML or JSON configuration file. Either the Kubewarden shape (the map at
// the top level) or {policies: map} is accepted.
func ReadConfig(path string) (Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read policies file: %w", err)
	}
	var wrapped struct {
		Policies Config `json:"policies"`
	}
	if err := yaml.UnmarshalStrict(b, &wrapped); err == nil && wrapped.Policies != nil {
		return wrapped.Policies.resolve(filepath.Dir(path)), nil
	}
	var cfg Config
	if err := yaml.UnmarshalStrict(b, &cfg); err != nil {
		return nil, fmt.Errorf("parse policies file %s: %w", path, err)
	}
	return cfg.resolve(filepath.Dir(path)), nil
}

func (c Config) resolve(dir string) Config {
	out := Config{}
	for name, p := range c {
		if p.isGroup() {
			p.Policies = Config(p.Policies).resolve(dir)
			out[name] = p
			continue
		}
		if p.Module == "" {
			p.Module = p.URL
		}
		p.Module = strings.TrimPrefix(p.Module, "file://")
		if p.Module != "" && !filepath.IsAbs(p.Module) && !strings.Contains(p.Module, "://") {
			p.Module = filepath.Join(dir, p.Module)
		}
		out[name] = p
	}
	return out
}

func (p PolicyConfig) mode() (PolicyMode, error) {
	m := p.Mode
	if m == "" {
		m = p.PolicyMode
	}
	switch m {
	case "", ModeProtect:
		return ModeProtect, nil
	case ModeMonitor:
		return ModeMonitor, nil
	}
	return "", fmt.Errorf("unknown mode %q (want protect or monitor)", m)
}

func (p PolicyConfig) timeout() time.Duration {
	s := p.TimeoutSeconds
	if s == 0 {
		s = p.TimeoutEvalSeconds
	}
	return time.Duration(s) * time.Second
}

// spec reads and, for Rego sources, compiles the module into what the engine loads.
func (p PolicyConfig) spec(ctx context.Context, name string) (engine.Spec, error) {
	mode, err := engine.ParseExecutionMode(p.ExecutionMode)
	if err != nil {
		return engine.Spec{}, err
	}
	if p.Module == "" {
		return engine.Spec{}, fmt.Errorf("no module")
	}
	if scheme, _, ok := strings.Cut(p.Module, "://"); ok {
		return engine.Spec{}, fmt.Errorf("module %s: only local files are supported here (%s:// pulls come with policy revisions)", p.Module, scheme)
	}
	for i, r := range p.ContextAwareResources {
		if r.APIVersion == "" || r.Kind == "" {
			return engine.Spec{}, fmt.Errorf("contextAwareResources[%d]: apiVersion and kind are both required", i)
		}
	}
	src, err := os.ReadFile(p.Module)
	if err != nil {
		return engine.Spec{}, fmt.Errorf("read module: %w", err)
	}
	spec := engine.Spec{
		Name: name, Module: src, ExecutionMode: mode, Settings: p.Settings,
		Mutating: p.Mutating || p.AllowedToMutate, Timeout: p.timeout(), Entrypoint: p.Entrypoint,
		ContextAwareResources: EngineResources(p.ContextAwareResources),
		AllowNetworkBuiltins:  p.AllowNetworkBuiltins,
	}
	switch ext := strings.ToLower(filepath.Ext(p.Module)); {
	case ext == ".rego":
		if mode != engine.ModeOPA && mode != engine.ModeGatekeeper {
			return engine.Spec{}, fmt.Errorf("a .rego module needs executionMode opa or gatekeeper, not %s", mode)
		}
		if spec.Entrypoint == "" && mode == engine.ModeGatekeeper {
			return engine.Spec{}, fmt.Errorf("a gatekeeper .rego module needs an entrypoint (<package path>/violation)")
		}
		if spec.Entrypoint == "" {
			spec.Entrypoint = "policy/main"
		}
		spec.Module, err = engine.CompileRego(ctx, map[string]string{filepath.Base(p.Module): string(src)}, spec.Entrypoint, p.RegoVersion == "v0")
	case (ext == ".yaml" || ext == ".yml") && mode == engine.ModeGatekeeper:
		var ct engine.ConstraintTemplate
		if ct, err = engine.ParseConstraintTemplate(src); err != nil {
			return engine.Spec{}, err
		}
		spec.Entrypoint = ct.Entrypoint
		spec.Module, err = engine.CompileRego(ctx, ct.Files, ct.Entrypoint, p.RegoVersion != "v1")
	}
	return spec, err
}

// fingerprint identifies everything that makes a policy behave as it does, so an unchanged
// entry of a reloaded file is left alone.
func (p PolicyConfig) fingerprint() (string, error) {
	if p.isGroup() {
		h := sha256.New()
		b, err := json.Marshal(p)
		if err != nil {
			return "", err
		}
		h.Write(b)
		for _, name := range sortedNames(p.Policies) {
			fp, err := p.Policies[name].fingerprint()
			if err != nil {
				return "", fmt.Errorf("member %s: %w", name, err)
			}
			h.Write([]byte(fp))
		}
		return hex.EncodeToString(h.Sum(nil)), nil
	}
	if strings.Contains(p.Module, "://") {
		return "", fmt.Errorf("module %s: only local files are supported here", p.Module)
	}
	h := sha256.New()
	b, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	h.Write(b)
	src, err := os.ReadFile(p.Module)
	if err != nil {
		return "", fmt.Errorf("read module: %w", err)
	}
	h.Write(src)
	return hex.EncodeToString(h.Sum(nil)), nil
}
