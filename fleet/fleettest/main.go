package fleettest

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"regent.dev/regent/fleet"
)

// Main is a TestMain that starts one hub apiserver for all of a package's tests (each works in
// namespaces of its own), sets *hub to it, runs the tests and exits with their result: starting a
// cluster per test would cost seconds each.
func Main(m *testing.M, hub **fleet.Cluster) {
	ctrl.SetLogger(logr.Discard())
	f, err := fleet.Start(context.Background(), fleet.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start cluster: %v\n", err)
		os.Exit(1)
	}
	*hub = f.Hub
	code := m.Run()
	if err := f.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop cluster: %v\n", err)
	}
	os.Exit(code)
}
