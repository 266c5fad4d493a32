package propagator

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
