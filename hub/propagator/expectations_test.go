package propagator

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

func TestExpectations_PendingUntilTheCacheShowsTheLastWrite(t *testing.T) {
	var x expectations
	key := types.NamespacedName{Namespace: "c1", Name: "ns.p"}
	if x.pending(key, "") {
		t.Fatal("pending before any write")
	}
	x.wrote(key, "", "10") // created
	x.wrote(key, "", "11") // its status applied in the same pass
	for _, cached := range []string{"", "10"} {
		if !x.pending(key, cached) {
			t.Fatalf("cache at %q has not seen the write that made 11", cached)
		}
	}
	if x.pending(key, "11") {
		t.Fatal("cache at 11 has seen every write")
	}
	if x.pending(key, "10") {
		t.Fatal("a cleared expectation must not come back")
	}
}

func TestExpectations_SomeoneElsesWriteClearsTheExpectation(t *testing.T) {
	var x expectations
	key := types.NamespacedName{Namespace: "c1", Name: "ns.p"}
	x.wrote(key, "5", "6")
	if x.pending(key, "7") {
		t.Fatal("a version the hub did not write means the cache moved on")
	}
}
