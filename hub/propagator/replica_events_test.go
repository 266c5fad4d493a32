package propagator

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// A replica event queues its root after replicaEventBatch, not at once: a burst of events from one
// root's replicas is one reconcile of the root, and a replica moved to another root concerns both.
func TestReplicaEvents_ABurstOfOneRootsReplicaEventsIsOneReconcile(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	replica := func(cluster, root string) *policyv1.Policy {
		return &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: root,
			Labels: map[string]string{RootPolicyLabel: root}}}
	}
	h := (&Reconciler{}).replicaEvents()
	ctx := context.Background()
	h.Create(ctx, event.CreateEvent{Object: replica("c100", "team.p")}, q)
	if n := q.Len(); n != 0 {
		t.Fatalf("the event queued its root at once (%d): each later event of the burst would start another reconcile", n)
	}
	for i := range 100 {
		h.Create(ctx, event.CreateEvent{Object: replica(fmt.Sprintf("c%d", i), "team.p")}, q)
		h.Update(ctx, event.UpdateEvent{ObjectOld: replica(fmt.Sprintf("c%d", i), "team.p"), ObjectNew: replica(fmt.Sprintf("c%d", i), "team.p")}, q)
	}
	h.Update(ctx, event.UpdateEvent{ObjectOld: replica("c0", "team.p"), ObjectNew: replica("c0", "team.q")}, q)
	h.Delete(ctx, event.DeleteEvent{Object: replica("c1", "team.p")}, q)

	got := map[types.NamespacedName]bool{}
	for range 2 {
		req, shutdown := q.Get()
		if shutdown {
			t.Fatal("queue shut down")
		}
		got[req.NamespacedName] = true
		q.Done(req)
	}
	if !got[types.NamespacedName{Namespace: "team", Name: "p"}] || !got[types.NamespacedName{Namespace: "team", Name: "q"}] {
		t.Fatalf("reconciled %v, want team/p and team/q", got)
	}
	if n := q.Len(); n != 0 {
		t.Fatalf("%d more reconciles queued after the burst's one per root", n)
	}
}

// The handler routes an answer as the gate says: the last answer of a turn queues its root at
// once, one that only changes a line of a progressing root's status waits for the status interval.
func TestReplicaEvents_TheLastAnswerOfATurnQueuesItsRootAtOnce(t *testing.T) {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	defer q.ShutDown()
	r := &Reconciler{}
	f := newGateFixture(clusterv1alpha1.ProgressivePerGroup, policyv1.Enforce)
	f.recordIn(&r.answers, time.Hour)
	h := r.replicaEvents()
	ctx := context.Background()
	for _, c := range []string{"a", "b"} {
		h.Update(ctx, event.UpdateEvent{ObjectOld: f.cache[c], ObjectNew: f.answered(c, policyv1.Compliant)}, q)
	}
	time.Sleep(2 * replicaEventBatch)
	if n := q.Len(); n != 0 {
		t.Fatalf("%d reconciles queued within the batch by answers that only change status lines held for an hour", n)
	}
	h.Update(ctx, event.UpdateEvent{ObjectOld: f.cache["c"], ObjectNew: f.answered("c", policyv1.Compliant)}, q)
	if n := q.Len(); n != 1 {
		t.Fatalf("the turn's last answer queued %d reconciles at once, want 1", n)
	}
	if req, _ := q.Get(); req.NamespacedName != f.key {
		t.Fatalf("queued %s, want %s", req, f.key)
	}
}

// echoFixture is one replica of team/p on cluster c1 and the handler of a bare reconciler.
type echoFixture struct {
	t *testing.T
	r *Reconciler
	h interface {
		Update(context.Context, event.UpdateEvent, workqueue.TypedRateLimitingInterface[reconcile.Request])
	}
	q   workqueue.TypedRateLimitingInterface[reconcile.Request]
	key types.NamespacedName
}

func newEchoFixture(t *testing.T) *echoFixture {
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
	t.Cleanup(q.ShutDown)
	r := &Reconciler{}
	return &echoFixture{t: t, r: r, h: r.replicaEvents(), q: q, key: types.NamespacedName{Namespace: "c1", Name: "team.p"}}
}

// at is the replica at resourceVersion rv with remediation action.
func (f *echoFixture) at(rv string, action policyv1.RemediationAction) *policyv1.Policy {
	return &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: f.key.Namespace, Name: f.key.Name, ResourceVersion: rv,
		Labels: map[string]string{RootPolicyLabel: "team.p"}}, Spec: policyv1.PolicySpec{RemediationAction: action}}
}

// updated records the hub's update of the replica from version before, answered with after.
func (f *echoFixture) updated(before, after string) {
	f.r.echoes.sending(f.key, before)
	f.r.echoes.sent(f.key, after, nil)
}

// queued sends the update from rv from to rv to and says how many reconciles it queued within twice
// the batch.
func (f *echoFixture) queued(from, to string) int {
	f.t.Helper()
	f.h.Update(context.Background(), event.UpdateEvent{ObjectOld: f.at(from, policyv1.Inform), ObjectNew: f.at(to, policyv1.Enforce)}, f.q)
	time.Sleep(2 * replicaEventBatch)
	n := f.q.Len()
	for range n {
		req, _ := f.q.Get()
		f.q.Done(req)
		f.q.Forget(req)
	}
	return n
}

// The watch event of the hub's own update of a replica (a turn's enforce write) reconciles
// nothing: the reconcile that wrote it planned with it. The replica's next event does.
func TestReplicaEvents_TheEchoOfTheHubsOwnUpdateReconcilesNothing(t *testing.T) {
	f := newEchoFixture(t)
	f.updated("4", "5")
	if n := f.queued("4", "5"); n != 0 {
		t.Fatalf("the echo of the hub's own update queued %d reconciles of its root, want none", n)
	}
	if n := f.queued("5", "6"); n != 1 {
		t.Fatalf("the replica's next update queued %d reconciles, want 1", n)
	}
	if f.r.echoes.m != nil {
		t.Fatalf("echoes still held after the echo: %v", f.r.echoes.m)
	}
}

// An event that is not the echo of the hub's last write reconciles its root, and an older one
// leaves the echo to come expected; a later one ends it (an echo that outran the write's record).
func TestReplicaEvents_OnlyTheEchoOfTheLastWriteIsDropped(t *testing.T) {
	f := newEchoFixture(t)
	f.updated("4", "5")
	if n := f.queued("3", "4"); n != 1 {
		t.Fatalf("an update older than the hub's write queued %d reconciles, want 1", n)
	}
	if n := f.queued("4", "5"); n != 0 {
		t.Fatalf("the echo after an older event queued %d reconciles, want none", n)
	}
	f.updated("6", "7")
	if n := f.queued("5", "8"); n != 1 {
		t.Fatalf("an update past the hub's write queued %d reconciles, want 1", n)
	}
	if f.r.echoes.m != nil {
		t.Fatalf("a later event left the write's record: %v", f.r.echoes.m)
	}
	f.updated("8", "9")
	f.h.(interface {
		Delete(context.Context, event.DeleteEvent, workqueue.TypedRateLimitingInterface[reconcile.Request])
	}).Delete(context.Background(), event.DeleteEvent{Object: f.at("9", policyv1.Enforce)}, f.q)
	if f.r.echoes.m != nil {
		t.Fatalf("a deleted replica's record stayed: %v", f.r.echoes.m)
	}
}

// A reconcile that found the hub's write not yet in the cache left the replica for the next pass,
// which only the write's echo starts; so does one still reading the cache when the echo comes.
func TestReplicaEvents_AnEchoAReconcileCountsOnStillQueuesItsRoot(t *testing.T) {
	root := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p"}}
	t.Run("left pending", func(t *testing.T) {
		f := newEchoFixture(t)
		f.r.expect.wrote(f.key, "4", "5")
		f.updated("4", "5")
		read := f.r.expect.markReading(f.key.Name)
		cached := map[string]*CachedReplica{"c1": recordOf(f.at("4", policyv1.Inform))}
		if ready := f.r.ready(root, []string{"c1"}, cached, read); len(ready) != 0 {
			t.Fatalf("ready %v: the cache shows the version before the hub's write", ready)
		}
		if f.r.expect.readingReplicas(f.key.Name) {
			t.Fatal("ready did not end the reconcile's read")
		}
		if n := f.queued("4", "5"); n != 1 {
			t.Fatalf("the echo a pass left its replica for queued %d reconciles, want 1", n)
		}
	})
	t.Run("reading", func(t *testing.T) {
		f := newEchoFixture(t)
		f.updated("4", "5")
		read := f.r.expect.markReading(f.key.Name)
		defer f.r.expect.doneReading(read)
		if n := f.queued("4", "5"); n != 1 {
			t.Fatalf("the echo that came while a reconcile read the cache queued %d reconciles, want 1", n)
		}
	})
}

// An update conditioned on the cached version is known as soon as it is sent: an echo that
// outruns the update's answer is dropped too, and the root is reconciled again only when the event
// taken for it was another version (a conflicting write, a relist past it).
func TestReplicaEvents_AnEchoThatOutrunsItsUpdatesAnswerIsDroppedToo(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "policies"}, "team.p", errors.New("modified"))
	for _, tc := range []struct {
		name     string
		from, to string // the event while the update is in flight
		after    string // the update's answer; "" for a conflict
		dropped  bool
		missed   bool
	}{
		{name: "the update's own", from: "4", to: "5", after: "5", dropped: true},
		{name: "a write that made it conflict", from: "4", to: "5", dropped: true, missed: true},
		{name: "a relist past it", from: "4", to: "9", after: "5", dropped: true, missed: true},
		{name: "from an older version", from: "3", to: "4", after: "5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newEchoFixture(t)
			f.r.echoes.sending(f.key, "4")
			if n := f.queued(tc.from, tc.to); (n == 0) != tc.dropped {
				t.Fatalf("the event %s→%s queued %d reconciles; dropped: %v, want %v", tc.from, tc.to, n, n == 0, tc.dropped)
			}
			var err error
			if tc.after == "" {
				err = conflict
			}
			f.r.echoes.sent(f.key, tc.after, err)
			if got := f.r.echoes.missedFor(f.key.Name); got != tc.missed {
				t.Fatalf("missed %v, want %v: the root must be read again exactly when the event dropped was not the update", got, tc.missed)
			}
			if f.r.echoes.missedFor(f.key.Name) {
				t.Fatal("missedFor said so twice")
			}
			if !tc.dropped {
				if n := f.queued("4", "5"); n != 0 {
					t.Fatalf("the update's echo after an older event queued %d reconciles, want none", n)
				}
			}
			if f.r.echoes.m != nil {
				t.Fatalf("echoes still held after the update's answer and echo: %v", f.r.echoes.m)
			}
		})
	}
}
