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
func guestError(ctx context.Context, err error, stderr *tailBuffer) error {
	if err == nil {
		return nil
	}
	var exit *sys.ExitError
	if errors.As(err, &exit) {
		switch exit.ExitCode() {
		case sys.ExitCodeDeadlineExceeded:
			return ErrTimeout
		case sys.ExitCodeContextCanceled:
			if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
				return ErrTimeout
			}
			return fmt.Errorf("evaluation cancelled: %w", context.Cause(ctx))
		}
		return fmt.Errorf("guest exited with code %d%s", exit.ExitCode(), stderr.suffix())
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return ErrTimeout
	}
	return fmt.Errorf("guest trapped: %w%s", err, stderr.suffix())
}

// tailBuffer keeps the last bytes a guest wrote to stderr, enough to explain a crash without
// letting a chatty guest grow the host's memory.
type tailBuffer struct {
	mu  sync.Mutex
	buf []byte
}

const tailSize = 2048

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > tailSize {
		t.buf = append(t.buf[:0], t.buf[len(t.buf)-tailSize:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) suffix() string {
	if t == nil {
		return ""
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s := strings.TrimSpace(string(t.buf))
	if s == "" {
		return ""
	}
	// The first line of a Go crash names the cause; goroutine dumps after it only add noise.
	if i := strings.Index(s, "\n\ngoroutine "); i > 0 {
		s = s[:i]
	}
	return ": " + strings.ReplaceAll(s, "\n", " | ")
}

func (t *tailBuffer) reset() {
	t.mu.Lock()
	t.buf = t.buf[:0]
	t.mu.Unlock()
}
