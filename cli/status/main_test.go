package status_test

import (
	"flag"
	"testing"

	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// update rewrites the golden files under testdata/ from what the code prints now.
var update = flag.Bool("update", false, "rewrite testdata/*.golden")

// hubCluster is one hub apiserver shared by the package's tests; each test works in its own
// namespace and cluster names and runs its own hub manager.
var hubCluster *fleet.Cluster

func TestMain(m *testing.M) { fleettest.Main(m, &hubCluster) }
