package fleet_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"regent.dev/regent/fleet"
)

func itoa(i int) string { return strconv.Itoa(i) }

const parentEnv = "REGENT_FLEET_TEST_PARENT"

// parentOCMEnv makes the parent start its fleet with OCM's agents.
const parentOCMEnv = "REGENT_FLEET_TEST_PARENT_OCM"

// TestFleetParent is not a test of its own: TestFleet_ParentKilled runs the test binary with it
// as a parent process that starts a fleet, says where, and waits to be killed.
func TestFleetParent(t *testing.T) {
	tmp := os.Getenv(parentEnv)
	if tmp == "" {
		t.Skip("helper process for TestFleet_ParentKilled_ChildrenDieAndFolderIsSwept")
	}
	f, err := fleet.Start(context.Background(), fleet.Options{TempDir: tmp,
		Managed: []fleet.ClusterSpec{{Name: "cluster1"}}, OCMAgents: os.Getenv(parentOCMEnv) != ""})
	if err != nil {
		fmt.Println("ERROR", err)
		os.Exit(1)
	}
	fmt.Println("FLEET", f.Dir, strings.Trim(fmt.Sprint(f.PIDs()), "[]"))
	time.Sleep(10 * time.Minute)
	os.Exit(1) // never returns normally: the test kills it
}

func TestFleet_ParentKilled_ChildrenDieAndFolderIsSwept(t *testing.T) {
	// etcd, kube-apiserver and kube-controller-manager for the hub and the cluster.
	parentKilled(t, 6)
}

func TestFleet_OCMAgents_ParentKilled_ChildrenDieAndFolderIsSwept(t *testing.T) {
	// Also OCM's conversion webhook, registration controller and addon manager on the hub, and
	// the cluster's registration and work agents.
	parentKilled(t, 11, parentOCMEnv+"=1")
}

func parentKilled(t *testing.T, wantProcs int, env ...string) {
	tmp := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFleetParent$", "-test.v")
	cmd.Env = append(append(os.Environ(), parentEnv+"="+tmp), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	var dir string
	var pids []int
	scanner := bufio.NewScanner(out)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.HasPrefix(line, "ERROR") {
			t.Fatal(line)
		}
		if fields := strings.Fields(line); len(fields) > 1 && fields[0] == "FLEET" {
			dir = fields[1]
			for _, p := range fields[2:] {
				pid, _ := strconv.Atoi(p)
				pids = append(pids, pid)
			}
			break
		}
	}
	if dir == "" || len(pids) != wantProcs {
		t.Fatalf("parent reported folder %q and processes %v, want a folder and %d processes", dir, pids, wantProcs)
	}

	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	eventually(t, 30*time.Second, "every fleet process to die with its parent", func() bool {
		for _, pid := range pids {
			if alive(pid) {
				return false
			}
		}
		return true
	})

	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the killed parent's folder should still be there for the sweep: %v", err)
	}
	fleet.SweepOrphans(tmp)
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Fatalf("orphaned fleet folder %s not swept: %v", dir, err)
	}
}

func TestSweepOrphans_KeepsLiveFleets(t *testing.T) {
	tmp := t.TempDir()
	live := filepath.Join(tmp, "regent-fleet-live")
	if err := os.MkdirAll(live, 0o755); err != nil {
		t.Fatal(err)
	}
	self, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		t.Fatal(err)
	}
	s := string(self)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if err := os.WriteFile(filepath.Join(live, "owner"), []byte(itoa(os.Getpid())+" "+fields[19]), 0o644); err != nil {
		t.Fatal(err)
	}
	fleet.SweepOrphans(tmp)
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("a live fleet's folder was swept: %v", err)
	}
}

func TestDefaultBinDir_MatchesTestbinScript(t *testing.T) {
	t.Setenv(fleet.BinDirEnv, "")
	out, err := exec.Command("bash", "../hack/testbin.sh", "--print-dir").Output()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.TrimSpace(string(out)), fleet.DefaultBinDir(); got != want {
		t.Fatalf("hack/testbin.sh builds into %s but the fleet looks in %s", got, want)
	}
}
