package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"
)

// Policy is a loaded policy: its module compiled, its settings validated, and a pool of
// instances ready. It is safe for concurrent use; Close unloads it.
type Policy struct {
	spec    Spec
	pool    *pool
	release func()
	payload func(request []byte) []byte
	decode  func(raw []byte) (Response, error)
}

// Spec returns what the policy was loaded from.
func (p *Policy) Spec() Spec { return p.spec }

// Load compiles (or finds compiled) the module, checks that it speaks the spec's ABI, makes a
// first instance and validates the settings with it. Every failure is an error that says which
// of those steps failed.
func (e *Engine) Load(ctx context.Context, spec Spec) (_ *Policy, err error) {
	if spec.ExecutionMode == "" {
		spec.ExecutionMode = ModeWaPC
	}
	if len(spec.Module) < 8 || string(spec.Module[:4]) != "\x00asm" {
		return nil, errors.New("module is not WebAssembly (no \\0asm header)")
	}
	settings := spec.settings()
	// JSON is UTF-8 (RFC 8259), and OPA's parser holds policies to that: settings Go's decoder
	// would take with invalid bytes would load and then fail every evaluation.
	if !json.Valid(settings) || !utf8.Valid(settings) {
		return nil, settingsError{errors.New("settings are not valid JSON (UTF-8)")}
	}
	p := &Policy{spec: spec, release: func() {}}
	var create func(ctx context.Context) (instance, error)
	switch spec.ExecutionMode {
	case ModeWaPC, ModeWASI:
		compiled, release, err := e.compileShared(ctx, spec.Module)
		if err != nil {
			return nil, err
		}
		p.release = release
		defer func() {
			if err != nil {
				release()
			}
		}()
		if create, err = e.kubewardenCreate(spec, compiled); err != nil {
			return nil, err
		}
		p.payload = func(req []byte) []byte { return kubewardenPayload(req, settings) }
		p.decode = decodeKubewardenResponse
	case ModeOPA, ModeGatekeeper:
		data := settings
		var inventory *Inventory
		if spec.ExecutionMode == ModeGatekeeper {
			inventory = spec.Inventory
		} else if spec.Inventory != nil {
			return nil, errors.New("an inventory is served to gatekeeper policies only (opa policies read their settings as data)")
		}
		p.payload = func(req []byte) []byte { return opaInput(req) }
		p.decode = decodeOPAResponse
		if spec.ExecutionMode == ModeGatekeeper {
			data = json.RawMessage("{}")
			p.payload = func(req []byte) []byte { return gatekeeperInput(req, settings) }
			p.decode = decodeGatekeeperResponse
		}
		module := e.prepare(spec.Module)
		create = func(ctx context.Context) (instance, error) {
			return e.newOPAInstance(ctx, module, spec.Entrypoint, data, inventory, spec.AllowNetworkBuiltins)
		}
	default:
		return nil, fmt.Errorf("unknown execution mode %q", spec.ExecutionMode)
	}

	first, err := create(ctx)
	if err != nil {
		return nil, err
	}
	p.pool = newPool(e.opts.MaxInstancesPerPolicy, create)
	p.pool.warm(first)
	sr, err := p.ValidateSettings(ctx, settings)
	if err != nil {
		p.pool.close()
		return nil, settingsError{fmt.Errorf("validate settings: %w", err)}
	}
	if !sr.Valid {
		p.pool.close()
		return nil, settingsError{fmt.Errorf("settings rejected by the policy: %s", sr.Message)}
	}
	return p, nil
}

func (e *Engine) kubewardenCreate(spec Spec, compiled *compiledModule) (func(ctx context.Context) (instance, error), error) {
	if spec.ExecutionMode == ModeWASI {
		if err := checkWASIModule(compiled.module); err != nil {
			return nil, err
		}
		return func(context.Context) (instance, error) { return e.startWASIInstance(compiled), nil }, nil
	}
	if err := checkWaPCModule(compiled.module); err != nil {
		return nil, err
	}
	logs := e.newGuestLogs(spec.Name)
	host := func(ctx context.Context, binding, namespace, operation string, payload []byte) ([]byte, error) {
		if binding == "kubewarden" && namespace == "tracing" && operation == "log" && !logs.allow() {
			return nil, nil // dropped and counted; logging never fails the guest
		}
		return e.callHost(ctx, HostCall{Policy: spec.Name, Allowed: spec.ContextAwareResources,
			Binding: binding, Namespace: namespace, Operation: operation, Payload: payload})
	}
	return func(ctx context.Context) (instance, error) { return e.newWaPCInstance(ctx, compiled, host, logs) }, nil
}

// ValidateSettings asks the policy whether it accepts settings.
func (p *Policy) ValidateSettings(ctx context.Context, settings []byte) (SettingsResponse, error) {
	var out SettingsResponse
	err := p.withInstance(ctx, func(ctx context.Context, inst instance) error {
		raw, err := inst.validateSettings(ctx, settings)
		if err != nil {
			return err
		}
		out, err = decodeSettingsResponse(raw)
		return err
	})
	return out, err
}

// Validate evaluates an admission request (the JSON of an AdmissionReview's request) and
// returns the policy's own answer; modes, mutation permission and patches are the caller's
// business (see Evaluate).
func (p *Policy) Validate(ctx context.Context, request []byte) (Response, error) {
	var out Response
	err := p.withInstance(ctx, func(ctx context.Context, inst instance) error {
		raw, err := inst.validate(ctx, p.payload(request))
		if err != nil {
			return err
		}
		out, err = p.decode(raw)
		return err
	})
	return out, err
}

// withInstance runs f on a pooled instance under the policy's deadline. Waiting for an instance
// counts against the caller's context only, so a queue does not eat the guest's time.
func (p *Policy) withInstance(ctx context.Context, f func(context.Context, instance) error) error {
	inst, err := p.pool.acquire(ctx)
	if err != nil {
		return fmt.Errorf("get an instance: %w", err)
	}
	defer p.pool.release(inst)
	evalCtx, cancel := context.WithTimeoutCause(ctx, p.spec.timeout(), context.DeadlineExceeded)
	defer cancel()
	start := time.Now()
	err = f(evalCtx, inst)
	if errors.Is(err, ErrTimeout) {
		waited := ""
		var hw *hostWaitError
		if errors.As(err, &hw) {
			waited = ", waiting for host capability " + hw.capability
		}
		return fmt.Errorf("%w after %s (limit %s)%s", ErrTimeout, time.Since(start).Round(time.Millisecond), p.spec.timeout(), waited)
	}
	return err
}

// Close unloads the policy: idle instances are closed now, busy ones when they finish.
func (p *Policy) Close() {
	p.pool.close()
	p.release()
}

func kubewardenPayload(request, settings []byte) []byte {
	b := make([]byte, 0, len(request)+len(settings)+24)
	b = append(b, `{"request":`...)
	b = append(b, request...)
	b = append(b, `,"settings":`...)
	b = append(b, settings...)
	return append(b, '}')
}

func opaInput(request []byte) []byte {
	b := make([]byte, 0, len(request)+12)
	b = append(b, `{"request":`...)
	b = append(b, request...)
	return append(b, '}')
}

func gatekeeperInput(review, parameters []byte) []byte {
	b := make([]byte, 0, len(review)+len(parameters)+26)
	b = append(b, `{"review":`...)
	b = append(b, review...)
	b = append(b, `,"parameters":`...)
	b = append(b, parameters...)
	return append(b, '}')
}
