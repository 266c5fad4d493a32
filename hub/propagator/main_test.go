package propagator_test

import (
	"context"
	"fmt"
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"regent.dev/regent/fleet"
)

// hubCluster is one hub apiserver shared by the package's tests; each test works in its own
// namespace and cluster names, and runs its own hub manager.
var hubCluster *fleet.Cluster

func TestMain(m *testing.M) {
	ctrl.SetLogger(logr.Discard())
	f, err := fleet.Start(context.Background(), fleet.Options{})
	if err != nil {
		fmt.Fprintf(os.Stderr, "start hub: %v\n", err)
		os.Exit(1)
	}
	hubCluster = f.Hub
	code := m.Run()
	if err := f.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop hub: %v\n", err)
	}
	os.Exit(code)
}
