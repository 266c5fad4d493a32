package realnode

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/quickstart"
)

// `regent quickstart --real-node`, as README's command runs it (a static regent binary), gives
// cluster1 a real node and prints what it makes real: a privileged pod refused by the policy
// server's webhook and an allowed pod Running on the node. It shares this package (and so its
// turn) with the other real-node test: one real-node fleet per host.
func TestQuickstart_RealNodeRunsAPodAndRefusesAPrivilegedOne(t *testing.T) {
	requireRealNode(t)
	cmd := exec.Command(regentBin, "quickstart", "--real-node", "--lifetime", "15m", "--testbin-script=", "--bin-dir", fleet.DefaultBinDir())
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	exited := make(chan error, 1)
	lines := make(chan string)
	go func() {
		scanner := bufio.NewScanner(stdout)
		for scanner.Scan() {
			lines <- scanner.Text()
		}
		close(lines)
		exited <- cmd.Wait()
	}()

	var kubeconfig, refusal, running string
	deadline := time.After(12 * time.Minute)
	for running == "" {
		select {
		case line, ok := <-lines:
			if !ok {
				t.Fatalf("quickstart exited before showing the real node: %v", <-exited)
			}
			t.Log(line)
			fields := strings.Fields(line)
			switch {
			case len(fields) >= 2 && fields[0] == quickstart.RealNodeCluster && strings.HasSuffix(fields[1], "/kubeconfig"):
				kubeconfig = fields[1]
			case strings.Contains(line, "a privileged pod is refused by the policy server's webhook"):
				if next, ok := <-lines; ok {
					t.Log(next)
					refusal = next
				}
			case strings.Contains(line, "is Running on it"):
				running = line
			}
		case <-deadline:
			t.Fatal("quickstart --real-node showed no pod Running on the node within 12 minutes")
		}
	}
	go func() { // keep draining so the quickstart never blocks on a full pipe
		for range lines {
		}
	}()
	if !strings.Contains(refusal, "container app is privileged, which this fleet does not allow") {
		t.Errorf("the refusal printed is not the policy's: %q", refusal)
	}
	// What the quickstart printed is what the cluster has: the pod on the node, Running.
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatalf("cluster1 kubeconfig %q: %v", kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{}
	if err := c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: "quickstart-allowed"}, pod); err != nil {
		t.Fatal(err)
	}
	if pod.Status.Phase != corev1.PodRunning || pod.Spec.NodeName == "" || !strings.Contains(running, pod.Spec.NodeName) {
		t.Errorf("pod %s on node %q, printed %q", pod.Status.Phase, pod.Spec.NodeName, running)
	}

	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("quickstart exited with %v after SIGINT, want 0", err)
		}
	case <-time.After(3 * time.Minute):
		t.Fatal("quickstart still running 3 minutes after SIGINT")
	}
}
