package engine

import (
	"encoding/json"
	"fmt"
	"time"
)

// ExecutionMode names the ABI a policy module speaks, with Kubewarden's spelling.
type ExecutionMode string

const (
	ModeWaPC       ExecutionMode = "kubewarden-wapc"
	ModeWASI       ExecutionMode = "wasi"
	ModeOPA        ExecutionMode = "opa"
	ModeGatekeeper ExecutionMode = "gatekeeper"
)

// ParseExecutionMode accepts Kubewarden's names and the short "wapc"; empty means waPC, as in
// Kubewarden, where waPC is the native ABI.
func ParseExecutionMode(s string) (ExecutionMode, error) {
	switch s {
	case "", "wapc", string(ModeWaPC):
		return ModeWaPC, nil
	case string(ModeWASI), string(ModeOPA), string(ModeGatekeeper):
		return ExecutionMode(s), nil
	}
	return "", fmt.Errorf("unknown execution mode %q (want kubewarden-wapc, wasi, opa or gatekeeper)", s)
}

// DefaultTimeout bounds one evaluation when a policy names no timeout of its own.
const DefaultTimeout = 2 * time.Second

// Spec is what the engine needs to load one policy.
type Spec struct {
	// Name identifies the policy in errors, logs and metrics.
	Name string
	// Module is the wasm binary. For opa and gatekeeper it is the output of CompileRego (or of
	// `opa build -t wasm`).
	Module []byte
	// ExecutionMode selects the ABI.
	ExecutionMode ExecutionMode
	// Settings are handed to the policy with every request (opa: as data; gatekeeper: as
	// input.parameters). Nil means {}.
	Settings json.RawMessage
	// Mutating allows the policy to answer with a mutated object; an unexpected mutation is a
	// denial, as in Kubewarden.
	Mutating bool
	// Timeout bounds one evaluation; zero means DefaultTimeout.
	Timeout time.Duration
	// Entrypoint is the Rego rule to evaluate (opa, gatekeeper), e.g. "policy/main"; empty
	// means the module's first entrypoint.
	Entrypoint string
	// ContextAwareResources are the kinds a waPC policy may read through the Host; nil means
	// none.
	ContextAwareResources []Resource
	// AllowNetworkBuiltins serves an opa or gatekeeper policy the built-ins that reach the
	// network (http.send, net.lookup_ip_addr, …); without it a module that imports one is
	// refused at load. Only a ClusterAdmissionPolicy may ask for it.
	AllowNetworkBuiltins bool
	// Inventory is what a gatekeeper policy reads as data.inventory (Gatekeeper's replicated
	// cluster state); nil means an empty one. Other modes refuse it.
	Inventory *Inventory
}

func (s Spec) timeout() time.Duration {
	if s.Timeout > 0 {
		return s.Timeout
	}
	return DefaultTimeout
}

func (s Spec) settings() json.RawMessage {
	if len(s.Settings) == 0 || string(s.Settings) == "null" {
		return json.RawMessage("{}")
	}
	return s.Settings
}
