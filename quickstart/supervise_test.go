package quickstart

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"regent.dev/regent/fleet"
)

// syncBuffer is the user's terminal: lines written by the supervisor's goroutines.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func waitFor(t *testing.T, out *syncBuffer, want string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the output:\n%s", want, out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestSupervisor_RestartsACrashingProcessWithGrowingBackoffAndSaysHowItDied(t *testing.T) {
	f := &fleet.Fleet{Dir: t.TempDir()}
	out := &syncBuffer{}
	sv, err := newSupervisor(out, filepath.Join(f.Dir, "run"))
	if err != nil {
		t.Fatal(err)
	}
	// Each run writes a line to its log and exits 3: a crash loop.
	s, err := launch(f, "crasher", "/bin/sh", "-c", "echo run; exit 3")
	if err != nil {
		t.Fatal(err)
	}
	first := s.proc.PID()
	ctx, cancel := context.WithCancel(context.Background())
	sv.keep(ctx, s)
	waitFor(t, out, "crasher (pid "+strconv.Itoa(first)+") died: exit status 3; restarting it in 1s, as its Deployment would")
	waitFor(t, out, "crasher restarted (pid ")
	waitFor(t, out, "died: exit status 3; restarting it in 2s") // a crash in a row doubles the wait
	cancel()
	sv.wait()

	if _, err := os.Stat(filepath.Join(f.Dir, "logs", "crasher.previous.log")); err != nil {
		t.Errorf("the crashed run's log was not kept: %v", err)
	}
	pid, err := os.ReadFile(filepath.Join(f.Dir, "run", "crasher.pid"))
	if err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(string(pid)) == strconv.Itoa(first) {
		t.Errorf("the pid file still names the first run (%d) after restarts", first)
	}
}

func TestSupervisor_SaysWhichSignalKilledAProcess(t *testing.T) {
	f := &fleet.Fleet{Dir: t.TempDir()}
	out := &syncBuffer{}
	sv, err := newSupervisor(out, filepath.Join(f.Dir, "run"))
	if err != nil {
		t.Fatal(err)
	}
	s, err := launch(f, "sleeper", "/bin/sleep", "600")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer func() {
		cancel()
		sv.wait()
		f.Stop()
	}()
	sv.keep(ctx, s)
	pidFile := filepath.Join(f.Dir, "run", "sleeper.pid")
	if got, _ := os.ReadFile(pidFile); strings.TrimSpace(string(got)) != strconv.Itoa(s.proc.PID()) {
		t.Fatalf("pid file %q, want %d", got, s.proc.PID())
	}
	s.proc.Kill()
	waitFor(t, out, "sleeper (pid "+strconv.Itoa(s.proc.PID())+") died: signal: killed; restarting it in 1s")
	waitFor(t, out, "sleeper restarted (pid ")
}
