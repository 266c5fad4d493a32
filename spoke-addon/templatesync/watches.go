package templatesync

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
)

// watches starts a watch per kind the first time a policy names it (as a template or a
// dependency) and maps each event to exactly the policies concerned: the template's own policy
// (by label) and every policy depending on that object (by an index kept from reconciles).
type watches struct {
	cache  cache.Cache
	scheme *runtime.Scheme
	ctrl   controller.Controller

	mu         sync.Mutex
	kinds      map[schema.GroupVersionKind]bool
	dependants map[depKey]map[types.NamespacedName]bool
	byPolicy   map[types.NamespacedName][]depKey
}

func newWatches(c cache.Cache, s *runtime.Scheme) *watches {
	return &watches{cache: c, scheme: s, kinds: map[schema.GroupVersionKind]bool{},
		dependants: map[depKey]map[types.NamespacedName]bool{}, byPolicy: map[types.NamespacedName][]depKey{}}
}

// track records the dependencies a policy has now, replacing what it had.
func (w *watches) track(policy types.NamespacedName, deps []depKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, k := range w.byPolicy[policy] {
		delete(w.dependants[k], policy)
		if len(w.dependants[k]) == 0 {
			delete(w.dependants, k)
		}
	}
	if len(deps) == 0 {
		delete(w.byPolicy, policy)
		return
	}
	w.byPolicy[policy] = deps
	for _, k := range deps {
		if w.dependants[k] == nil {
			w.dependants[k] = map[types.NamespacedName]bool{}
		}
		w.dependants[k][policy] = true
	}
}

// watchedKinds lists the kinds watched so far: the kinds a stale template can have.
func (w *watches) watchedKinds() []schema.GroupVersionKind {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]schema.GroupVersionKind, 0, len(w.kinds))
	for k := range w.kinds {
		out = append(out, k)
	}
	return out
}

// ensure starts watching gvk unless already watched.
func (w *watches) ensure(gvk schema.GroupVersionKind) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.kinds[gvk] {
		return nil
	}
	obj := watchObject(w.scheme, gvk)
	if err := w.ctrl.Watch(source.Kind[client.Object](w.cache, obj, handler.EnqueueRequestsFromMapFunc(w.mapper(gvk)))); err != nil {
		return err
	}
	w.kinds[gvk] = true
	return nil
}

func (w *watches) mapper(gvk schema.GroupVersionKind) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		var out []reconcile.Request
		if policy := o.GetLabels()[PolicyLabel]; policy != "" {
			ns := o.GetLabels()[ClusterNamespaceLabel]
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: policy}})
		}
		w.mu.Lock()
		defer w.mu.Unlock()
		for p := range w.dependants[depKey{GVK: gvk, Namespace: o.GetNamespace(), Name: o.GetName()}] {
			out = append(out, reconcile.Request{NamespacedName: p})
		}
		return out
	}
}
