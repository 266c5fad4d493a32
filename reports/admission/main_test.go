package admission

import (
	"testing"

	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// cluster is one apiserver, with kube-controller-manager's garbage collector, shared by the
// package's tests; each works in a namespace of its own.
var cluster *fleet.Cluster

func TestMain(m *testing.M) { fleettest.Main(m, &cluster) }
