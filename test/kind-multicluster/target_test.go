package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"
)

// targetEnv chooses where the suite runs: the local fleet (default, real apiservers on this
// machine) or kind clusters on a Docker engine.
const targetEnv = "REGENT_E2E_TARGET"

// target returns "local" or "kind", or an error naming the accepted values.
func target() (string, error) {
	switch v := os.Getenv(targetEnv); v {
	case "", "local":
		return "local", nil
	case "kind":
		return "kind", nil
	default:
		return "", fmt.Errorf("%s=%q: want local (the default) or kind", targetEnv, v)
	}
}

func kindMode() bool { t, _ := target(); return t == "kind" }

// kindPrerequisites says plainly why kind cannot run here. Asking for kind where it cannot run
// fails the run: a silent pass would claim a kind run that never happened.
func kindPrerequisites(ctx context.Context) error {
	docker, err := exec.LookPath("docker")
	if err != nil {
		return fmt.Errorf("%s=kind needs a Docker engine, and there is no docker command on PATH; "+
			"run without %s to use the local fleet, which needs none", targetEnv, targetEnv)
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, docker, "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		return fmt.Errorf("%s=kind needs a Docker engine, and `docker info` failed (%v): %s; "+
			"run without %s to use the local fleet, which needs none", targetEnv, err, strings.TrimSpace(string(out)), targetEnv)
	}
	return nil
}

// kindTool finds a command on PATH, or installs it with `go install` at the pinned version into
// dir: kind and clusteradm are what a user of kind-based OCM setups already has.
func kindTool(ctx context.Context, dir, name, module string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	cmd := exec.CommandContext(ctx, "go", "install", module)
	cmd.Env = append(os.Environ(), "GOBIN="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", errors.Join(fmt.Errorf("%s is not on PATH and `go install %s` failed", name, module),
			fmt.Errorf("%w: %s", err, out))
	}
	return dir + "/" + name, nil
}
