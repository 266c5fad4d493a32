package fleet

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The fleet's processes must die with the process that started them, even when it is killed
// with SIGKILL and runs no cleanup: Linux's parent-death signal does that. envtest starts etcd
// and kube-apiserver itself and offers no hook for it, so it is given wrappers that ask for the
// signal (util-linux's setpriv) and then exec the real binary under the same PID.
const rootPrefix = "regent-fleet-"

func writeDeathWrappers(binDir, wrapDir string) error {
	if err := os.MkdirAll(wrapDir, 0o755); err != nil {
		return err
	}
	setpriv, err := findSetpriv()
	if err != nil {
		return err
	}
	for _, name := range []string{"kube-apiserver", "etcd"} {
		script := fmt.Sprintf("#!/bin/sh\nexec %s --pdeathsig KILL -- %s \"$@\"\n", setpriv, filepath.Join(binDir, name))
		if err := os.WriteFile(filepath.Join(wrapDir, name), []byte(script), 0o755); err != nil {
			return err
		}
	}
	return nil
}

func findSetpriv() (string, error) {
	for _, p := range []string{"/usr/bin/setpriv", "/bin/setpriv"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", fmt.Errorf("setpriv not found: install util-linux (apt-get install util-linux)")
}

// deathSignal is the SysProcAttr for processes the fleet starts itself.
func deathSignal() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}

// ownerFile records which process owns a fleet root, so that a later fleet can tell a dead
// owner's leftovers from a live fleet's files.
const ownerFile = "owner"

func writeOwner(root string) error {
	return os.WriteFile(filepath.Join(root, ownerFile), []byte(processIdentity(os.Getpid())), 0o644)
}

// processIdentity is the PID plus its start time, so a reused PID is not mistaken for the owner.
func processIdentity(pid int) string {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return ""
	}
	// Field 22 is the start time; the command name (field 2) may hold spaces, so count from ')'.
	fields := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	if len(fields) < 20 {
		return ""
	}
	return strconv.Itoa(pid) + " " + fields[19]
}

// SweepOrphans removes fleet roots under dir whose owner is dead, killing any process still
// using them. A fleet calls it on start; it never touches a live fleet's root.
func SweepOrphans(dir string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), rootPrefix) {
			continue
		}
		root := filepath.Join(dir, e.Name())
		if fleetAlive(root) {
			continue
		}
		// A real node's containers, mounts, cgroups and rules outlive its processes; its shims
		// must still run when it is swept (their sockets are named from their command lines).
		sweepNodes(root)
		killUsers(root)
		_ = unmountUnder(root)
		_ = os.RemoveAll(root)
	}
}

// fleetAlive says whether the fleet rooted at root may still be running: its owner is alive, or
// it has no owner file yet and was created less than a minute ago.
func fleetAlive(root string) bool {
	owner, err := os.ReadFile(filepath.Join(root, ownerFile))
	if err != nil {
		info, err := os.Stat(root)
		return err == nil && time.Since(info.ModTime()) < time.Minute
	}
	pid, _ := strconv.Atoi(strings.Fields(string(owner) + " 0")[0])
	return processIdentity(pid) == string(owner)
}

// ProcessesUsing lists the PIDs whose command line names a path under root: every process a
// fleet started does (data, certificate and kubeconfig paths).
func ProcessesUsing(root string) []int {
	var pids []int
	procs, _ := os.ReadDir("/proc")
	self := os.Getpid()
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil || pid == self {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil || !bytes.Contains(cmdline, []byte(root+string(filepath.Separator))) {
			continue
		}
		pids = append(pids, pid)
	}
	return pids
}

func killUsers(root string) {
	for _, pid := range ProcessesUsing(root) {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}
