package quickstart

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"regent.dev/regent/fleet"
)

// Restart backoff, shaped like the kubelet's CrashLoopBackOff but shorter, because a quickstart
// user is watching: the first restart waits restartBackoff, each crash in a row doubles it up to
// maxRestartBackoff, and a process that stayed up for backoffReset starts again from the first.
const (
	restartBackoff    = time.Second
	maxRestartBackoff = 30 * time.Second
	backoffReset      = time.Minute
)

// supervised is one of the quickstart's processes with the way to start it again.
type supervised struct {
	proc  *fleet.Process
	start func() (*fleet.Process, error)
}

// launch starts name as a fleet process of bin and returns it with the way to start it again.
func launch(f *fleet.Fleet, name, bin string, args ...string) (*supervised, error) {
	start := func() (*fleet.Process, error) { return f.StartProcess(name, bin, args...) }
	p, err := start()
	if err != nil {
		return nil, err
	}
	return &supervised{proc: p, start: start}, nil
}

// supervisor keeps the quickstart's processes running as their Deployments and StatefulSets
// would on a real fleet: a process that dies, however it died, is started again after a backoff,
// and the user reads which one died, how, and that it came back. Each running process's PID is
// in <pidDir>/<name>.pid, so a user can kill one on purpose; the log of the run before a restart
// is kept as <name>.previous.log, as `kubectl logs --previous` shows a crashed container's.
type supervisor struct {
	out    io.Writer
	pidDir string
	outMu  sync.Mutex
	wg     sync.WaitGroup
}

func newSupervisor(out io.Writer, pidDir string) (*supervisor, error) {
	if err := os.MkdirAll(pidDir, 0o755); err != nil {
		return nil, err
	}
	return &supervisor{out: out, pidDir: pidDir}, nil
}

// keep restarts s's process whenever it dies, until ctx ends.
func (sv *supervisor) keep(ctx context.Context, s *supervised) {
	sv.writePID(s.proc)
	sv.wg.Add(1)
	go func() {
		defer sv.wg.Done()
		sv.loop(ctx, s)
	}()
}

// wait returns once no supervised process can be started any more: after ctx ended, so the
// fleet's Stop sees every process that was ever started.
func (sv *supervisor) wait() { sv.wg.Wait() }

func (sv *supervisor) loop(ctx context.Context, s *supervised) {
	backoff := restartBackoff
	started := time.Now()
	restarts := 0
	proc := s.proc
	for {
		select {
		case <-ctx.Done():
			return
		case <-proc.Done():
		}
		if ctx.Err() != nil {
			return // stopping: the fleet ends its processes itself
		}
		if time.Since(started) >= backoffReset {
			backoff = restartBackoff
		}
		sv.say("%s (pid %d) died: %s; restarting it in %s, as its Deployment would", proc.Name, proc.PID(), how(proc), backoff)
		keepPreviousLog(proc)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(2*backoff, maxRestartBackoff)
			next, err := s.start()
			if err != nil {
				sv.say("%s could not be restarted: %v; trying again in %s", proc.Name, err, backoff)
				continue
			}
			restarts++
			proc, started = next, time.Now()
			sv.writePID(proc)
			sv.say("%s restarted (pid %d, restart %d)", proc.Name, proc.PID(), restarts)
			break
		}
	}
}

// how says how a process ended: its exit status or the signal that killed it.
func how(p *fleet.Process) string {
	if st := p.State(); st != nil {
		return st.String() // "exit status 2", "signal: killed"
	}
	return "unknown exit"
}

// keepPreviousLog moves a dead process's log aside before its next run truncates the file.
func keepPreviousLog(p *fleet.Process) {
	_ = os.Rename(p.Log, strings.TrimSuffix(p.Log, ".log")+".previous.log")
}

func (sv *supervisor) writePID(p *fleet.Process) {
	path := filepath.Join(sv.pidDir, p.Name+".pid")
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(p.PID())+"\n"), 0o644); err != nil {
		sv.say("pid file of %s: %v", p.Name, err)
		return
	}
	if err := os.Rename(tmp, path); err != nil {
		sv.say("pid file of %s: %v", p.Name, err)
	}
}

func (sv *supervisor) say(format string, args ...any) {
	sv.outMu.Lock()
	defer sv.outMu.Unlock()
	fmt.Fprintf(sv.out, format+"\n", args...)
}
