package propagator_test

import (
	"strconv"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// A hub whose cache lags its own writes by more than the expectations' TTL must not take a
// replica it created for missing (and create it again, answered "already exists", as 28,423
// times at 150,000 replicas) until its cache reaches the write; a cache that has passed the
// write and still does not show it saw the object go, and the replica is compared again at once. Resource versions and progress are the apiserver's and a real informer's; only
// the clock is fake.
func TestExpectations_WaitForALaggingCacheButNotForOneThatPassedTheWrite(t *testing.T) {
	e := newEnv(t)
	clock := clocktesting.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	x := propagator.NewExpectations(clock)
	c, err := cache.New(hubCluster.Config, cache.Options{Scheme: testScheme,
		DefaultNamespaces: map[string]cache.Config{e.ns: {}}})
	if err != nil {
		t.Fatal(err)
	}
	inf, err := c.GetInformer(e.ctx, &policyv1.Policy{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddEventHandler(x.Progress()); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(e.ctx) }()
	if !c.WaitForCacheSync(e.ctx) {
		t.Fatal("cache did not sync")
	}
	policy := func(name string) *policyv1.Policy {
		return &policyv1.Policy{ObjectMeta: e.objectMeta(name),
			Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform, PolicyTemplates: []*policyv1.PolicyTemplate{}}}
	}
	cached := func(name string) string {
		p := &policyv1.Policy{}
		err := c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, p)
		if apierrors.IsNotFound(err) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return p.ResourceVersion
	}
	// moveCache writes another object and waits until the cache shows it: the cache has moved
	// past everything written before.
	moveCache := func(name string) {
		t.Helper()
		p := policy(name)
		e.create(p)
		e.eventually("the cache shows "+name, func() (bool, string) { return cached(name) != "", "" })
		// The handler hears of it after the store took it; the marks come from the handler.
		want, _ := strconv.ParseUint(p.ResourceVersion, 10, 64)
		e.eventually("the expectations hear of "+name, func() (bool, string) {
			seen, _ := strconv.ParseUint(x.Seen(), 10, 64)
			return seen >= want, "seen " + x.Seen()
		})
	}
	moveCache("warm-up")

	// A reconcile reads the cache, then creates the replica it did not show.
	read := x.MarkReading("a")
	a := policy("a")
	e.create(a)
	keyA := client.ObjectKeyFromObject(a)
	x.Wrote(keyA, "", a.ResourceVersion)
	// Ten minutes later (twice the TTL) the cache is still moving: that read is still taken for
	// one the write had not reached, so the replica is not created again.
	clock.Step(10 * time.Minute)
	moveCache("b")
	if !x.Pending(keyA, "", read) {
		t.Fatal("a write made after the cache was read was taken for missing past the TTL, while the cache still moves")
	}
	// A read after the cache passed the write shows it.
	if rv := cached("a"); rv != a.ResourceVersion || x.Pending(keyA, rv, x.Mark()) {
		t.Fatalf("the cache shows %q (written %s): pending %v", rv, a.ResourceVersion, x.Pending(keyA, rv, x.Mark()))
	}

	// A replica deleted by someone else before the cache saw it: once the cache passed the
	// write, its absence is compared again at once, inside the TTL.
	d := policy("d")
	e.create(d)
	keyD := client.ObjectKeyFromObject(d)
	x.Wrote(keyD, "", d.ResourceVersion)
	if err := e.c.Delete(e.ctx, d); err != nil {
		t.Fatal(err)
	}
	moveCache("e")
	if rv := cached("d"); rv != "" {
		t.Fatalf("the cache still shows the deleted d at %s", rv)
	}
	if x.Pending(keyD, "", x.Mark()) {
		t.Fatal("the cache passed the write and shows no object, yet the write is still expected")
	}

	// A cache that stops moving (a watch sitting silent until the reflector restarts it) keeps
	// a write it has not reached expected past the TTL, up to expectationMax.
	// The read is marked before the write, as a reconcile marks it before it reads the cache: a
	// mark taken after the create could already be past the write, and the absence read with it
	// would then be an object that went.
	stale := x.MarkReading("f")
	f := policy("f")
	e.create(f)
	keyF := client.ObjectKeyFromObject(f)
	x.Wrote(keyF, "", f.ResourceVersion)
	clock.Step(6 * time.Minute)
	if !x.Pending(keyF, "", stale) {
		t.Fatal("past the TTL with no progress of the cache since, the write was taken for missing")
	}
	clock.Step(25 * time.Minute)
	if x.Pending(keyF, "", stale) {
		t.Fatal("still expected past expectationMax")
	}
}
