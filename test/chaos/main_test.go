package chaos

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"
)

// regentBin is the regent binary built for this run: the processes the tests kill are the same
// program a user runs.
var regentBin string

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	dir, err := os.MkdirTemp("", "regent-chaos-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	regentBin = filepath.Join(dir, "regent")
	build := exec.Command("go", "build", "-o", regentBin, "regent.dev/regent/cmd/regent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build regent:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}
