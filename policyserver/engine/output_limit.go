package engine

import (
	"bytes"
	"errors"
	"fmt"
)

// Whatever a guest makes the host copy out of its memory lives outside the wasm memory limit:
// WASI stdout, a waPC answer or host-call payload, an OPA result set. Each is bounded by the
// engine's output limit, and a guest that goes over is trapped, so a guest writing in a loop
// costs the host at most the limit, not whatever it can write before its deadline.

// DefaultOutputLimitBytes bounds what one evaluation's guest can make the host hold when
// Options names no limit: room for an answer that carries a mutated object of etcd's largest
// size (1.5 MiB) twice over, escaped.
const DefaultOutputLimitBytes = 8 << 20

// ErrOutputLimit marks an evaluation stopped because its guest wrote more than the limit.
var ErrOutputLimit = errors.New("output limit exceeded")

type outputLimitError struct {
	what  string
	limit uint64
}

func (e *outputLimitError) Error() string {
	return fmt.Sprintf("%v: the policy's %s is over the limit of %d bytes", ErrOutputLimit, e.what, e.limit)
}

func (e *outputLimitError) Is(target error) bool { return target == ErrOutputLimit }

// checkOutput traps the guest (host functions trap by panicking) when size is over the limit.
func checkOutput(what string, size, limit uint64) {
	if size > limit {
		panic(&outputLimitError{what: what, limit: limit})
	}
}

// boundedBuffer collects a guest's stream (WASI stdout) up to limit bytes; the write that would
// pass it traps the guest instead, from inside its fd_write.
type boundedBuffer struct {
	buf   bytes.Buffer
	limit uint64
	what  string
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	checkOutput(b.what, uint64(b.buf.Len())+uint64(len(p)), b.limit)
	return b.buf.Write(p)
}

func (b *boundedBuffer) Bytes() []byte { return b.buf.Bytes() }
