package background

import (
	"testing"

	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// cluster is one apiserver, with the kube-controller-manager's garbage collector, shared by the
// package's tests; each test has its own namespaces and policy server name.
var cluster *fleet.Cluster

func TestMain(m *testing.M) { fleettest.Main(m, &cluster) }
