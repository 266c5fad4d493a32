package main

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// quickstartOutput collects the lines a quickstart process prints, as a user reads them.
type quickstartOutput struct {
	mu    sync.Mutex
	lines []string
}

func (o *quickstartOutput) find(prefix string) (string, bool) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, l := range o.lines {
		if strings.HasPrefix(l, prefix) {
			return l, true
		}
	}
	return "", false
}

// TestQuickstart_KilledHubIsRestartedAndTheRolloutResumes is the README's "kill the hub, watch
// the rollout resume where it was": the hub is SIGKILLed while the sample rollout waits on its dev
// group, the quickstart says so and starts it again, and the rollout completes on the replicas
// it had already written.
func TestQuickstart_KilledHubIsRestartedAndTheRolloutResumes(t *testing.T) {
	if err := fleet.CheckBinaries(fleet.DefaultBinDir()); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), cliEnv+"=quickstart --lifetime 10m --testbin-script=")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	out := &quickstartOutput{}
	go func() { // drains to the end, so the quickstart never blocks on a full pipe
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			t.Log(scanner.Text())
			out.mu.Lock()
			out.lines = append(out.lines, scanner.Text())
			out.mu.Unlock()
		}
	}()
	var fleetDir, hubKubeconfig, pidFile string
	fleettest.Eventually(t, 5*time.Minute, func() (bool, string) {
		if l, ok := out.find("starting hub"); ok {
			fleetDir = l[strings.LastIndex(l, " ")+1:]
		}
		if l, ok := out.find("  hub "); ok {
			hubKubeconfig = strings.Fields(l)[1]
		}
		if l, ok := out.find("  kill -9 $(cat "); ok {
			pidFile = strings.TrimSuffix(strings.TrimPrefix(l, "  kill -9 $(cat "), ")")
		}
		_, up := out.find("press Ctrl-C")
		return up && fleetDir != "" && hubKubeconfig != "" && pidFile != "",
			fmt.Sprintf("the guide with the fleet folder (%q), hub kubeconfig (%q) and the hub's pid file (%q)", fleetDir, hubKubeconfig, pidFile)
	})
	if filepath.Dir(filepath.Dir(pidFile)) != filepath.Clean(fleetDir) {
		t.Fatalf("the hub's pid file %s is not in the fleet folder %s", pidFile, fleetDir)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", hubKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	hub, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	replicaUIDs := func() map[string]types.UID {
		uids := map[string]types.UID{}
		for _, c := range []string{"cluster1", "cluster2", "cluster3"} {
			r := &policyv1.Policy{}
			if err := hub.Get(ctx, types.NamespacedName{Namespace: c, Name: "policies.sample-namespace"}, r); err == nil {
				uids[c] = r.UID
			}
		}
		return uids
	}

	// The moment of the kill: dev (cluster1) is enforced, prod is still waiting for its turn.
	fleettest.Eventually(t, 3*time.Minute, func() (bool, string) {
		dev := &policyv1.Policy{}
		err := hub.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: "policies.sample-namespace"}, dev)
		root := &policyv1.Policy{}
		rootErr := hub.Get(ctx, types.NamespacedName{Namespace: "policies", Name: "sample-namespace"}, root)
		return err == nil && rootErr == nil && dev.Spec.RemediationAction == policyv1.Enforce && len(replicaUIDs()) == 3,
			fmt.Sprintf("dev's replica enforced (%v %q) and three replicas (%v)", err, dev.Spec.RemediationAction, replicaUIDs())
	})
	before := replicaUIDs()
	root := &policyv1.Policy{}
	if err := hub.Get(ctx, types.NamespacedName{Namespace: "policies", Name: "sample-namespace"}, root); err != nil {
		t.Fatal(err)
	}
	if root.Status.RolloutStatus == policyv1.RolloutSucceeded {
		t.Fatalf("the rollout succeeded before the kill (the dev group soaks 15s): %+v", root.Status)
	}
	pid := readPID(t, pidFile)
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 the hub (pid %d): %v", pid, err)
	}
	t.Logf("killed the hub (pid %d) with the root's rollout %q", pid, root.Status.RolloutStatus)

	var restartedPID int
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		_, died := out.find(fmt.Sprintf("regent-hub (pid %d) died: signal: killed; restarting it", pid))
		restarted, ok := out.find("regent-hub restarted (pid ")
		if ok {
			_, _ = fmt.Sscanf(restarted, "regent-hub restarted (pid %d,", &restartedPID)
		}
		return died && ok, "the quickstart saying the hub died of SIGKILL and was restarted"
	})
	if got := readPID(t, pidFile); got != restartedPID || got == pid {
		t.Fatalf("pid file says %d after the restart; the quickstart said %d (killed: %d)", got, restartedPID, pid)
	}
	if err := syscall.Kill(restartedPID, 0); err != nil {
		t.Fatalf("the restarted hub (pid %d) is not running: %v", restartedPID, err)
	}

	fleettest.Eventually(t, 3*time.Minute, func() (bool, string) {
		root := &policyv1.Policy{}
		err := hub.Get(ctx, types.NamespacedName{Namespace: "policies", Name: "sample-namespace"}, root)
		return err == nil && root.Status.RolloutStatus == policyv1.RolloutSucceeded && root.Status.ComplianceState == policyv1.Compliant &&
				len(root.Status.Status) == 3,
			fmt.Sprintf("the sample rollout to succeed after the restart: %v %+v", err, root.Status)
	})
	// Resumed, not redone: the replicas written before the kill are the ones that completed.
	if after := replicaUIDs(); fmt.Sprint(after) != fmt.Sprint(before) {
		t.Errorf("replicas re-created across the hub's restart: UIDs %v before, %v after", before, after)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("quickstart exited with %v after SIGINT, want 0", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("quickstart still running 2 minutes after SIGINT")
	}
	if left := fleet.ProcessesUsing(fleetDir); len(left) > 0 {
		t.Errorf("processes %v still running after the quickstart exited", left)
	}
	if _, err := os.Stat(filepath.Clean(fleetDir)); !os.IsNotExist(err) {
		t.Errorf("fleet folder %s left behind", fleetDir)
	}
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil {
		t.Fatalf("pid file %s: %v", path, err)
	}
	return pid
}
