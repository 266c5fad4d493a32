package policyset_test

import (
	"testing"

	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// hubCluster is one hub apiserver shared by the package's tests; each test works in its own
// namespace.
var hubCluster *fleet.Cluster

func TestMain(m *testing.M) { fleettest.Main(m, &hubCluster) }
