package dashboard_test

import (
	"testing"

	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// hubCluster is one hub apiserver shared by the package's tests; each works in namespaces and
// cluster names of its own.
var hubCluster *fleet.Cluster

func TestMain(m *testing.M) { fleettest.Main(m, &hubCluster) }
