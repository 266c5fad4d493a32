package engine

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
	"github.com/tetratelabs/wazero/api"
)

// opaBuiltins serves opa_builtinN: built-ins the OPA wasm compiler does not compile into the
// module (sprintf, regex.match, time.*, …) are called back on the host, where OPA's own Go
// implementations answer them. Only built-ins on the allow-list (opa_capabilities.go) are bound;
// a module that imports any other is refused when it is loaded.
type opaBuiltins struct {
	funcs map[int32]topdown.BuiltinFunc
	inst  *opaInstance

	// bctx is made on the first built-in call of an evaluation and dropped at its end:
	// most evaluations call none, and a context per evaluation would be pure overhead.
	bctx *topdown.BuiltinContext
	stop func() bool
}

func (b *opaBuiltins) endEval() {
	if b.stop != nil {
		b.stop()
	}
	b.bctx, b.stop = nil, nil
}

func (b *opaBuiltins) context(ctx context.Context) topdown.BuiltinContext {
	if b.bctx == nil {
		cancel := topdown.NewCancel()
		b.bctx = &topdown.BuiltinContext{
			Context:  ctx,
			Metrics:  metrics.New(),
			Seed:     rand.Reader,
			Time:     ast.NumberTerm(json.Number(strconv.FormatInt(time.Now().UnixNano(), 10))),
			Cancel:   cancel,
			Cache:    make(builtins.Cache),
			QueryID:  0,
			ParentID: 0,
		}
		// A running Go built-in can't be interrupted by wazero; those that loop cooperate
		// through topdown's Cancel.
		b.stop = context.AfterFunc(ctx, cancel.Cancel)
	}
	return *b.bctx
}

type opaAbort struct{ message string }

func (e opaAbort) Error() string { return "policy aborted: " + e.message }

func (b *opaBuiltins) call(ctx context.Context, stack []uint64, arity int) {
	id := int32(stack[0])
	f := b.funcs[id]
	if f == nil {
		panic(fmt.Errorf("policy called unknown built-in #%d", id))
	}
	args := make([]*ast.Term, arity)
	for i := range arity {
		t, err := b.inst.dumpValue(ctx, api.DecodeU32(stack[2+i]))
		if err != nil {
			panic(fmt.Errorf("built-in argument: %w", err))
		}
		args[i] = t
	}
	var out *ast.Term
	err := f(b.context(ctx), args, func(t *ast.Term) error { out = t; return nil })
	if err != nil {
		var halt topdown.Halt
		if errors.As(err, &halt) {
			panic(fmt.Errorf("built-in: %w", err))
		}
		// Other errors make the call undefined, as in OPA's non-strict evaluation.
		out = nil
	}
	if out == nil {
		stack[0] = 0
		return
	}
	result := out.String()
	checkOutput("built-in result", uint64(len(result)), b.inst.outputLimit)
	addr, err := b.inst.parseValue(ctx, []byte(result))
	if err != nil {
		panic(fmt.Errorf("built-in result: %w", err))
	}
	stack[0] = uint64(addr)
}

func (b *opaBuiltins) abort(ctx context.Context, m api.Module, stack []uint64) {
	msg := cString(m.Memory(), api.DecodeU32(stack[0]))
	if len(msg) > guestErrorLimit {
		msg = msg[:guestErrorLimit] + "…"
	}
	panic(opaAbort{message: msg})
}

// cString reads a NUL-terminated string from guest memory.
func cString(mem api.Memory, addr uint32) string {
	if addr >= mem.Size() {
		return "(unreadable)"
	}
	data, _ := mem.Read(addr, mem.Size()-addr)
	if n := bytes.IndexByte(data, 0); n >= 0 {
		data = data[:n]
	}
	return string(data)
}
