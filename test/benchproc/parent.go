package benchproc

import (
	"os"
	"os/exec"
	"strconv"
	"syscall"
	"testing"
	"time"

	"regent.dev/regent/fleet/fleettest"
)

// Environment the parent gives its child.
const (
	envKubeconfig = "REGENT_BENCH_CHILD_KUBECONFIG"
	envMetrics    = "REGENT_BENCH_CHILD_METRICS"
)

// Process is a running child.
type Process struct {
	Cmd *exec.Cmd
	// MetricsAddr is host:port of the child's /metrics.
	MetricsAddr string
	exited      chan struct{}
}

// Start runs test (a test function's name) of the current test binary as a child on kubeconfig,
// with env added to the environment, and returns once its /metrics answers. The child's output
// goes to the parent's stderr; the child is killed when tb ends if it still runs.
func Start(tb testing.TB, test, kubeconfig string, env ...string) *Process {
	tb.Helper()
	p := &Process{MetricsAddr: fleettest.FreeAddr(tb), exited: make(chan struct{})}
	p.Cmd = exec.Command(os.Args[0], "-test.run=^"+test+"$")
	p.Cmd.Env = append(append(os.Environ(), envKubeconfig+"="+kubeconfig, envMetrics+"="+p.MetricsAddr), env...)
	p.Cmd.Stdout, p.Cmd.Stderr = os.Stderr, os.Stderr
	if err := p.Cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	go func() { _ = p.Cmd.Wait(); close(p.exited) }()
	tb.Cleanup(func() { _ = p.Cmd.Process.Kill(); <-p.exited })
	for p.Metrics() == "" {
		select {
		case <-p.exited:
			tb.Fatalf("%s exited before its metrics answered: %v", test, p.Cmd.ProcessState)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return p
}

// Stop asks the child to stop (SIGTERM, as a kubelet does) and waits until it has.
func (p *Process) Stop() {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	<-p.exited
}

// Pid is the child's process ID.
func (p *Process) Pid() int { return p.Cmd.Process.Pid }

// EnvInt is the integer in the environment variable name, or def when it holds none.
func EnvInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil {
		return v
	}
	return def
}

// Kill ends the child at once (SIGKILL, as kill -9 or an OOM kill) and waits until it has.
func (p *Process) Kill() {
	_ = p.Cmd.Process.Kill()
	<-p.exited
}
