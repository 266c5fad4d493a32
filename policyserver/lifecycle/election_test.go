package lifecycle

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/fleet/fleettest"
)

// TestElect_ATermThatLostTheLeaseEndsBeforeTheNextStarts takes the Lease away from a leader
// whose term then takes long to unwind (a pass finishing after its context ended), longer than
// the Lease lasts, so the same process wins the Lease back meanwhile. The next term must wait for
// the previous one: two terms at once would run two passes over the same revisions and let the
// old term's cleanup mark the new one as not leading.
func TestElect_ATermThatLostTheLeaseEndsBeforeTheNextStarts(t *testing.T) {
	e := newEnv(t)
	kube := kubernetes.NewForConfigOrDie(e.config)
	opts := Options{Namespace: testNamespace, PolicyServer: "terms", Logger: testr.New(t),
		LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond}
	const unwind = 3 * time.Second // longer than LeaseDuration: the Lease is free again before the term ends

	var running, overlaps, terms atomic.Int32
	secondTerm := make(chan struct{})
	lead := func(ctx context.Context) {
		if running.Add(1) > 1 {
			overlaps.Add(1)
		}
		defer running.Add(-1)
		if terms.Add(1) == 2 {
			close(secondTerm)
		}
		<-ctx.Done()
		time.Sleep(unwind)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		if err := elect(ctx, opts, kube, "me_1", lead); err != nil {
			t.Error(err)
		}
	})
	defer func() { cancel(); wg.Wait() }()

	fleettest.Eventually(t, time.Minute, func() (bool, string) { return terms.Load() == 1, "the first term" })
	// Another holder takes the Lease: the leader cannot renew it and its term ends.
	lease := &coordinationv1.Lease{}
	key := client.ObjectKey{Namespace: testNamespace, Name: LeaderLeaseName(opts.PolicyServer)}
	if err := e.client.Get(ctx, key, lease); err != nil {
		t.Fatal(err)
	}
	fleettest.Edit(t, e.client, lease, func(l *coordinationv1.Lease) {
		thief, now := "thief", metav1.NewMicroTime(time.Now())
		l.Spec.HolderIdentity, l.Spec.RenewTime, l.Spec.AcquireTime = &thief, &now, &now
	})
	select {
	case <-secondTerm:
	case <-time.After(time.Minute):
		t.Fatal("the process never led again after the other holder's Lease expired")
	}
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("a new term started while the previous one was still running (%d times)", n)
	}
}
