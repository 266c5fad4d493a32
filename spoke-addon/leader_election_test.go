package spokeaddon_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	spokeaddon "regent.dev/regent/spoke-addon"
)

// Two replicas of the addon on one cluster (a Deployment mid rolling update): one is active, the
// other waits, and takes over as soon as the first stops.
func TestLeaderElection_OneActiveAddonAndAHandOverWhenItStops(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	local := newClient(t, f.Managed[0].Config)

	type replica struct {
		mgr    manager.Manager
		active atomic.Bool
		cancel context.CancelFunc
		done   chan error
	}
	start := func() *replica {
		r := &replica{done: make(chan error, 1)}
		mgr, err := spokeaddon.New(spokeaddon.Options{Hub: addonHubIdentity(t, f.Hub, "cluster1"), Local: f.Managed[0].Config,
			ClusterName: "cluster1", ExternalConfigPolicy: true, ExternalAdmissionPolicy: true, LeaderElection: true,
			Controllers: []func(ctrl.Manager) error{func(m ctrl.Manager) error {
				// A runnable that needs leader election, like every controller of the addon.
				return m.Add(manager.RunnableFunc(func(ctx context.Context) error {
					r.active.Store(true)
					<-ctx.Done()
					return nil
				}))
			}}})
		if err != nil {
			t.Fatal(err)
		}
		r.mgr = mgr
		ctx, cancel := context.WithCancel(context.Background())
		r.cancel = cancel
		go func() { r.done <- mgr.Start(ctx) }()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	holder := func() string {
		var l coordinationv1.Lease
		if err := local.Get(context.Background(), client.ObjectKey{Namespace: spokeaddon.DefaultInstallNamespace, Name: spokeaddon.LeaderElectionID}, &l); err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	first := start()
	<-first.mgr.Elected()
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		return first.active.Load() && holder() != "", fmt.Sprintf("first replica active %v, Lease holder %q", first.active.Load(), holder())
	})
	held := holder()

	second := start()
	// The second replica is up (its caches synced) while the first holds the Lease: it must not run
	// the controllers.
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		return second.mgr.GetCache().WaitForCacheSync(context.Background()), "second replica's cache syncing"
	})
	select {
	case <-second.mgr.Elected():
		t.Fatalf("the second replica was elected while %q held the Lease", held)
	default:
	}
	if second.active.Load() {
		t.Fatal("the second replica ran a leader-elected runnable while the first held the Lease")
	}

	first.cancel()
	if err := <-first.done; err != nil {
		t.Fatalf("first replica stopped with %v", err)
	}
	first.done <- nil // for its cleanup
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		return second.active.Load() && holder() != "" && holder() != held,
			fmt.Sprintf("after the first stopped: second active %v, Lease holder %q (was %q)", second.active.Load(), holder(), held)
	})
}
