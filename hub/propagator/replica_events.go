package propagator

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// replicaEventBatch is how long a root waits after an event of one of its replicas before it is
// reconciled. A root's replica events come in bursts (the watch events of its own 3,000 creates, a
// fleet's reports after a rollout step) and each reconcile walks all of the root's clusters: the
// cheaper a reconcile got, the more often such a burst ran it (2,493 reconciles for 30,000
// replicas, against 1,123 before the decision groups were remembered). Events within the batch
// join one reconcile; a rollout step waits for it once.
const replicaEventBatch = time.Second

type requestQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// replicaEvents enqueues a replica's root replicaEventBatch after the event; the queue keeps the
// earliest time of a key already waiting, so the events meanwhile add nothing.
func replicaEvents() handler.EventHandler {
	add := func(q requestQueue, objs ...client.Object) {
		for _, o := range objs {
			for _, req := range replicaToRoot(context.Background(), o) {
				q.AddAfter(req, replicaEventBatch)
			}
		}
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q requestQueue) { add(q, e.Object) },
		// Both: a replica moved to another root (a label edited) concerns the two.
		UpdateFunc:  func(_ context.Context, e event.UpdateEvent, q requestQueue) { add(q, e.ObjectOld, e.ObjectNew) },
		DeleteFunc:  func(_ context.Context, e event.DeleteEvent, q requestQueue) { add(q, e.Object) },
		GenericFunc: func(_ context.Context, e event.GenericEvent, q requestQueue) { add(q, e.Object) },
	}
}
