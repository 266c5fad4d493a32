package aggregate_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"regent.dev/regent/fleet"
)

// cluster is one apiserver, with the kube-controller-manager's garbage collector, shared by the
// package's tests; each test works in its own namespaces and runs its own aggregators.
var cluster *fleet.Cluster

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	f, err := fleet.Start(context.Background(), fleet.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start cluster: %v\n", err)
		os.Exit(1)
	}
	cluster = f.Hub
	code := m.Run()
	if err := f.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop cluster: %v\n", err)
	}
	os.Exit(code)
}
