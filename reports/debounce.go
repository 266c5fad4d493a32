package reports

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Debounced enqueues key(object) after delay on every event; false from key skips the event. An
// item already waiting keeps its earlier time, so a burst of changes costs one reconcile instead
// of postponing it forever. The aggregator (a namespace) and the roll-up (the cluster) use it.
func Debounced[T any](delay func() time.Duration, key func(T) (reconcile.Request, bool)) handler.TypedEventHandler[T, reconcile.Request] {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	add := func(o T, q queue) {
		if req, ok := key(o); ok {
			q.AddAfter(req, delay())
		}
	}
	return handler.TypedFuncs[T, reconcile.Request]{
		CreateFunc:  func(_ context.Context, e event.TypedCreateEvent[T], q queue) { add(e.Object, q) },
		UpdateFunc:  func(_ context.Context, e event.TypedUpdateEvent[T], q queue) { add(e.ObjectNew, q) },
		DeleteFunc:  func(_ context.Context, e event.TypedDeleteEvent[T], q queue) { add(e.Object, q) },
		GenericFunc: func(_ context.Context, e event.TypedGenericEvent[T], q queue) { add(e.Object, q) },
	}
}

// MetadataOf is an empty PartialObjectMetadata of gvk, for metadata-only watches.
func MetadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}
