package propagator

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// replicaEventBatch is how long a root waits after an event of one of its replicas before it is
// reconciled. A root's replica events come in bursts (the watch events of its own 3,000 creates, a
// fleet's reports after a rollout step) and each reconcile walks all of the root's clusters: the
// cheaper a reconcile got, the more often such a burst ran it (2,493 reconciles for 30,000
// replicas, against 1,123 before the decision groups were remembered). Events within the batch
// join one reconcile; a rollout step waits for it once. A cluster's answer is routed by what it
// can change (replica_answers.go).
const replicaEventBatch = time.Second

type requestQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// replicaEvents enqueues a replica's root replicaEventBatch after the event, or as its answer
// routes; the queue keeps the earliest time of a key already waiting, so the events meanwhile add
// nothing.
func (r *Reconciler) replicaEvents() handler.EventHandler {
	add := func(q requestQueue, objs ...client.Object) {
		for _, o := range objs {
			for _, req := range replicaToRoot(context.Background(), o) {
				q.AddAfter(req, replicaEventBatch)
			}
		}
	}
	update := func(q requestQueue, old, updated client.Object) {
		before, after := cachedOf(old), cachedOf(updated)
		reqs := replicaToRoot(context.Background(), updated)
		if r.echo(old, updated, reqs) {
			ownEchoes.WithLabelValues("replica").Inc()
			return
		}
		if before == nil || after == nil || len(reqs) != 1 || !answerOnly(before, after) {
			// Both: a replica moved to another root (a label edited) concerns the two.
			add(q, old, updated)
			return
		}
		route, delay := r.answers.route(reqs[0].NamespacedName, before, after)
		answers.WithLabelValues(answerRouteNames[route]).Inc()
		switch route {
		case answerNow:
			q.Add(reqs[0])
		case answerHeld:
			// The status interval counts from the answer, not from the reconcile that sees it.
			r.pace.holding(reqs[0].NamespacedName, time.Now())
			q.AddAfter(reqs[0], delay)
		case answerBatched:
			q.AddAfter(reqs[0], delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q requestQueue) { add(q, e.Object) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q requestQueue) { update(q, e.ObjectOld, e.ObjectNew) },
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q requestQueue) {
			r.echoes.awaited(client.ObjectKeyFromObject(e.Object))
			add(q, e.Object)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q requestQueue) { add(q, e.Object) },
	}
}

// echo says whether an update event is the echo of the hub's own last update of the replica, to
// be dropped (replicaEchoes). A reconcile of its root reading the cache meanwhile may have read
// the replica before the informer's store took the write, and counts on the event: it is checked
// first, so one that starts reading after the check reads the store with the write in it.
func (r *Reconciler) echo(old, updated client.Object, reqs []reconcile.Request) bool {
	if len(reqs) != 1 || r.expect.readingReplicas(updated.GetName()) {
		return false
	}
	if from := replicaToRoot(context.Background(), old); len(from) != 1 || from[0] != reqs[0] {
		return false
	}
	return r.echoes.echo(client.ObjectKeyFromObject(updated), old.GetResourceVersion(), updated.GetResourceVersion())
}

// cachedOf is a replica as the hub's replica cache holds it; a cache without the hub's transform
// holds Policies.
func cachedOf(o client.Object) *CachedReplica {
	switch p := o.(type) {
	case *CachedReplica:
		return p
	case *policyv1.Policy:
		if isReplica(p) {
			return recordOf(p)
		}
	}
	return nil
}

// currentReplica reads the replica named replica on a cluster from the replica cache as it is now;
// nil when the cache has none.
func (r *Reconciler) currentReplica(replica string) func(cluster string) *CachedReplica {
	return func(cluster string) *CachedReplica {
		obj, ok, err := r.replicaIndex.GetByKey(cluster + "/" + replica)
		if err != nil || !ok {
			return nil
		}
		if o, isObj := obj.(client.Object); isObj {
			return cachedOf(o)
		}
		return nil
	}
}
