package propagator

import (
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"

	policyv1 "regent.dev/regent/api/policy/v1"
)

func TestExpectations_PendingUntilTheCacheShowsTheLastWrite(t *testing.T) {
	var x expectations
	key := types.NamespacedName{Namespace: "c1", Name: "ns.p"}
	if x.pending(key, "", x.mark()) {
		t.Fatal("pending before any write")
	}
	x.wrote(key, "", "10") // created
	x.wrote(key, "", "11") // its status applied in the same pass
	for _, cached := range []string{"", "10"} {
		if !x.pending(key, cached, x.mark()) {
			t.Fatalf("cache at %q has not seen the write that made 11", cached)
		}
	}
	if x.pending(key, "11", x.mark()) {
		t.Fatal("cache at 11 has seen every write")
	}
	if x.pending(key, "10", x.mark()) {
		t.Fatal("a cleared expectation must not come back")
	}
}

func TestExpectations_SomeoneElsesWriteClearsTheExpectation(t *testing.T) {
	var x expectations
	key := types.NamespacedName{Namespace: "c1", Name: "ns.p"}
	x.wrote(key, "5", "6")
	if x.pending(key, "7", x.mark()) {
		t.Fatal("a version the hub did not write means the cache moved on")
	}
}

func policyAt(rv string) *policyv1.Policy {
	return &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv}}
}

func TestExpectations_AMovingCacheKeepsTheWriteUntilExpectationMax(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	x := expectations{clock: clock}
	key := types.NamespacedName{Namespace: "c1", Name: "ns.p"}
	x.observed(policyAt("5"))
	x.wrote(key, "", "1000")
	rv := 5
	for elapsed := time.Duration(0); elapsed < expectationMax-time.Minute; elapsed += time.Minute {
		clock.Step(time.Minute)
		rv++
		x.observed(policyAt(strconv.Itoa(rv)))
		if !x.pending(key, "", x.mark()) {
			t.Fatalf("after %s, the cache moving at %d, short of the write at 1000: no longer pending", elapsed+time.Minute, rv)
		}
	}
	clock.Step(2 * time.Minute)
	x.observed(policyAt(strconv.Itoa(rv + 1)))
	if x.pending(key, "", x.mark()) {
		t.Fatal("still pending past expectationMax")
	}
}

func TestExpectations_ADeletedObjectsTombstoneIsProgress(t *testing.T) {
	x := expectations{}
	key := types.NamespacedName{Namespace: "c1", Name: "ns.p"}
	x.wrote(key, "", "10")
	x.observed(toolscache.DeletedFinalStateUnknown{Key: "c1/x", Obj: policyAt("12")})
	if x.pending(key, "", x.mark()) {
		t.Fatal("the cache passed the write (tombstone at 12) and shows no object: still pending")
	}
}
