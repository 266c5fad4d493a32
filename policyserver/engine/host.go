package engine

import (
	"context"
	"errors"
	"fmt"
)

// Resource is a kind a policy may read from the cluster: one entry of Kubewarden's
// contextAwareResources.
type Resource struct {
	APIVersion string
	Kind       string
}

func (r Resource) String() string { return r.APIVersion + " " + r.Kind }

// HostCall is one waPC __host_call: what the guest asked for, and who asked.
type HostCall struct {
	// Policy is the name of the policy whose guest is calling.
	Policy string
	// Allowed are the kinds the policy may read (its spec's ContextAwareResources).
	Allowed []Resource
	// Binding, Namespace and Operation name the capability, e.g. kubewarden / kubernetes /
	// get_resource; Payload is its JSON request.
	Binding, Namespace, Operation string
	Payload                       []byte
}

// Capability names the capability called, e.g. "kubewarden/kubernetes/get_resource".
func (c HostCall) Capability() string { return c.Binding + "/" + c.Namespace + "/" + c.Operation }

// Host serves the capabilities waPC guests call for (Kubernetes lookups, registry digests, …).
// An error's text is what the guest receives, so it should tell the policy's author what went
// wrong. Implementations should honour ctx; the engine stops waiting when it is done anyway.
type Host interface {
	Call(ctx context.Context, call HostCall) ([]byte, error)
}

// errNoHost answers every host call of an engine started without a Host.
var errNoHost = errors.New("this policy server was started without host capabilities")

// callHost runs one host call under the evaluation's deadline. The call runs on a goroutine of
// its own because not every client a Host uses honours a context (discovery does not): a slow
// apiserver must not hold an admission request past the policy's timeout.
func (e *Engine) callHost(ctx context.Context, call HostCall) ([]byte, error) {
	if e.opts.Host == nil {
		return nil, fmt.Errorf("host capability %s is not available: %w", call.Capability(), errNoHost)
	}
	type result struct {
		b   []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		b, err := e.opts.Host.Call(ctx, call)
		done <- result{b, err}
	}()
	select {
	case r := <-done:
		return r.b, r.err
	case <-ctx.Done():
		return nil, fmt.Errorf("host capability %s: %w", call.Capability(), context.Cause(ctx))
	}
}

// hostWaitError is a timeout that struck while the guest waited for the host: the message says
// which capability was slow, which is what an operator needs to know.
type hostWaitError struct{ capability string }

func (e *hostWaitError) Error() string {
	return fmt.Sprintf("%v while waiting for host capability %s", ErrTimeout, e.capability)
}

func (e *hostWaitError) Is(target error) bool { return target == ErrTimeout }
