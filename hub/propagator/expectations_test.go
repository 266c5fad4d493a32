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

// A relist hands the cache its objects in name order, not version order: one written after the
// hub's write can arrive before the hub's own replica does. Until the relist settles, the highest
// version handed over does not mean the cache shows everything older.
func TestExpectations_ARelistDoesNotReleaseWritesItHasNotReached(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	x := expectations{clock: clock}
	key := types.NamespacedName{Namespace: "c1", Name: "ns.p"}
	x.observed(policyAt("5")) // the watch, in order
	x.wrote(key, "", "10")
	if settling, _ := x.settling(); settling {
		t.Fatal("settling before any relist")
	}

	// The watch ends; the relist hands over a newer object first, then older ones.
	x.observed(policyAt("40"))
	duringFirstItem := x.mark()
	x.observed(policyAt("7"))
	if !x.pending(key, "", duringFirstItem) {
		t.Fatal("a read taken after the relist's first object released a write the relist has not reached")
	}
	x.observed(policyAt("3"))
	if !x.pending(key, "", x.mark()) {
		t.Fatal("released while the relist runs")
	}
	settling, after := x.settling()
	if !settling || after <= 0 || after > relistQuiet+time.Second {
		t.Fatalf("settling %v after %s, want a recheck within %s", settling, after, relistQuiet+time.Second)
	}
	// The root that left it alone is compared again once the relist settles, sooner than a
	// longer retry it had, never later than a shorter one, and not at all when nothing waited.
	if got := x.recheck(1, 0); got != after {
		t.Errorf("recheck with no retry: %s, want %s", got, after)
	}
	if got := x.recheck(1, time.Hour); got != after {
		t.Errorf("recheck with a retry in an hour: %s, want %s", got, after)
	}
	if got := x.recheck(1, time.Second); got != time.Second {
		t.Errorf("recheck with a retry in a second: %s, want 1s", got)
	}
	if got := x.recheck(0, 0); got != 0 {
		t.Errorf("recheck with nothing waiting: %s, want none", got)
	}

	// A read taken during the relist stays untrusted after it; one taken after settles it.
	stale := x.mark()
	clock.Step(relistQuiet + time.Second)
	if !x.pending(key, "", stale) {
		t.Fatal("a read taken mid-relist released the write")
	}
	if settling, _ := x.settling(); settling {
		t.Fatal("still settling past relistQuiet")
	}
	if x.pending(key, "", x.mark()) {
		t.Fatal("the relist passed the write and the cache shows no object: still pending")
	}
}

// A watch's events arrive in version order and are not taken for a relist; an object handed over
// again (a resync) cannot be told from a relist's, so it too only delays a release.
func TestExpectations_InOrderWatchEventsDoNotLookLikeARelist(t *testing.T) {
	x := expectations{}
	for _, rv := range []string{"5", "6", "9", "12"} {
		x.observed(policyAt(rv))
	}
	if settling, _ := x.settling(); settling {
		t.Fatal("a watch's events in version order taken for a relist")
	}
	x.observed(policyAt("12"))
	if settling, _ := x.settling(); !settling {
		t.Fatal("an object handed over again (a resync) is not in version order")
	}
}

func replicaAt(key types.NamespacedName, rv string) *policyv1.Policy {
	return &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, ResourceVersion: rv}}
}

// A propagation of 150,000 replicas held an expectation for most of them until each root's next
// reconcile; the informer handing over the write (or a later version) now releases it.
func TestExpectations_TheWritesOwnEventReleasesIt(t *testing.T) {
	var x expectations
	key := types.NamespacedName{Namespace: "c1", Name: "ns.p"}
	other := types.NamespacedName{Namespace: "c2", Name: "ns.p"}
	x.observed(policyAt("5"))
	x.wrote(key, "", "10")
	x.wrote(other, "", "11")
	x.observed(replicaAt(other, "9")) // an older version of another replica: nothing to release
	x.observed(replicaAt(key, "10"))
	if _, held := x.m[key]; held {
		t.Fatal("the write's own event left its expectation held")
	}
	if _, held := x.m[other]; !held {
		t.Fatal("another replica's expectation went with it")
	}
	x.observed(replicaAt(other, "12")) // someone else's write after the hub's
	if x.m != nil {
		t.Fatalf("the map outlived its last expectation: %v", x.m)
	}

	// An event of a version the write moved the replica from does not release it.
	x.wrote(key, "12", "13")
	x.observed(replicaAt(key, "12"))
	if _, held := x.m[key]; !held {
		t.Fatal("released by an event of the version the write replaced")
	}
	x.forget(key)

	// A create answered "already exists" has no version of its own; the object's showing up
	// in the cache at any version releases it, as the next comparison would.
	x.wrote(key, "", "")
	x.observed(toolscache.DeletedFinalStateUnknown{Key: "c1/ns.p", Obj: replicaAt(key, "20")})
	if _, held := x.m[key]; !held {
		t.Fatal("released by a tombstone")
	}
	x.observed(replicaAt(key, "20"))
	if _, held := x.m[key]; held {
		t.Fatal("the replica a refused create found is in the cache, yet its expectation is held")
	}
}

// A reconcile that read the cache before the write's event came holds the older object: releasing
// the expectation under it would make it send the write again.
func TestExpectations_AReconcileBetweenReadAndComparisonKeepsItsExpectations(t *testing.T) {
	var x expectations
	key := types.NamespacedName{Namespace: "c1", Name: "ns.p"}
	x.observed(policyAt("5"))
	x.wrote(key, "", "10")
	read := x.markReading(key.Name) // ... and the cache it read has no replica yet
	x.observed(replicaAt(key, "10"))
	if !x.pending(key, "", read) {
		t.Fatal("a reconcile that read the cache before the write's event was told to write it again")
	}
	x.doneReading(read)
	x.doneReading(read) // the deferred call after writeReplicas' own
	if x.reading[key.Name] {
		t.Fatal("the hold outlived doneReading")
	}
	x.observed(replicaAt(key, "10")) // e.g. a resync, or the next reconcile's comparison
	if _, held := x.m[key]; held {
		t.Fatal("held after the reconcile compared")
	}
}

// The create's answer can come after its watch event: a write the cache already shows is not
// recorded, unless a relist makes the cache's progress untrustworthy.
func TestExpectations_AWriteTheCacheAlreadyShowsIsNotHeld(t *testing.T) {
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	x := expectations{clock: clock}
	key := types.NamespacedName{Namespace: "c1", Name: "ns.p"}
	x.observed(policyAt("5"))
	x.wrote(key, "", "10")
	x.observed(policyAt("20")) // past the write: the store took key at 10 on the way
	x.wrote(key, "10", "15")
	if x.m != nil {
		t.Fatalf("a write the cache shows was held: %v", x.m)
	}
	x.observed(policyAt("7")) // a relist, out of version order
	x.wrote(key, "15", "16")
	if !x.pending(key, "15", x.mark()) {
		t.Fatal("during a relist, a write was taken as seen by the cache's highest version")
	}
}
