package e2e

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestKindTargetWithoutDockerFailsTheRun runs this test binary again, asking for kind on a PATH
// with no docker: the run must exit non-zero and say why, before any test runs.
func TestKindTargetWithoutDockerFailsTheRun(t *testing.T) {
	if kindMode() {
		t.Skip("already running on kind")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), targetEnv+"=kind", "PATH="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("asking for kind without a Docker engine passed:\n%s", out)
	}
	if !strings.Contains(string(out), "needs a Docker engine") {
		t.Errorf("the failure does not say why:\n%s", out)
	}
	cmd = exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), targetEnv+"=kubernetes")
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "want local (the default) or kind") {
		t.Errorf("an unknown target was not refused (err %v):\n%s", err, out)
	}
}
