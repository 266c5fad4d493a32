package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/tetratelabs/wazero/sys"
)

// ErrTimeout marks an evaluation that its deadline interrupted.
var ErrTimeout = errors.New("evaluation timed out")

// guestError turns what wazero returns from a call into an error a user can act on: a deadline
// becomes ErrTimeout, an exit carries the guest's last words from stderr (a Go guest that runs
// out of memory says so there).
func guestError(ctx context.Context, err error, stderr *stderrHead) error {
	if err == nil {
		return nil
	}
	var limit *outputLimitError
	if errors.As(err, &limit) {
		return limit
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return ErrTimeout
		case sys.ExitCodeContextCanceled:
			return evaluationEnded(ctx)
		}
		return fmt.Errorf("guest exited with code %d%s", exit.ExitCode(), stderr.suffix())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ErrTimeout
	}
	// wazero appends a wasm stack trace; the guest's stderr says more in fewer words.
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return fmt.Errorf("guest trapped: %s%s", msg, stderr.suffix())
}

// evaluationEnded is the error of an evaluation whose context ended: ErrTimeout at its deadline.
func evaluationEnded(ctx context.Context) error {
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return ErrTimeout
	}
	return fmt.Errorf("evaluation cancelled: %w", context.Cause(ctx))
}

// stderrHead keeps the first bytes a guest wrote to stderr during one call — where a Go guest
// names the cause of a crash, before its goroutine dump — without letting a chatty guest grow
// the host's memory.
type stderrHead struct {
	mu  sync.Mutex
	buf []byte
}

const stderrHeadSize = 1024

func (t *stderrHead) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if room := stderrHeadSize - len(t.buf); room > 0 {
		t.buf = append(t.buf, p[:min(room, len(p))]...)
	}
	return len(p), nil
}

func (t *stderrHead) suffix() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return ""
	}
	// The first paragraph of a Go crash names the cause; the stack dumps after it are noise.
	s, _, _ = strings.Cut(s, "\n\n")
	return ": " + strings.ReplaceAll(s, "\n", " | ")
}

func (t *stderrHead) reset() {
	t.mu.Lock()
	t.buf = t.buf[:0]
	t.mu.Unlock()
}
