package capabilities

import (
	"context"
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"regent.dev/regent/policyserver/engine"
)

// replicator keeps Gatekeeper policies' inventories (data.inventory) in step with the cluster:
// one informer per kind, shared by every policy that declares the kind in its
// contextAwareResources, fanning each change out to their inventories. An informer runs while
// some policy subscribes to its kind and stops with the last one.
type replicator struct {
	dynamic dynamic.Interface
	lookups *kubernetesLookups
	log     logr.Logger

	mu    sync.Mutex
	feeds map[schema.GroupVersionResource]*feed
}

// feed is one kind's informer and the inventories it fills.
type feed struct {
	apiVersion, kind string
	informer         cache.SharedIndexInformer
	stop             chan struct{}
	// mu orders events against seeding a new subscriber from the informer's store.
	mu          sync.Mutex
	subscribers map[*engine.Inventory]int
}

func newReplicator(cfg *rest.Config, lookups *kubernetesLookups, log logr.Logger) (*replicator, error) {
	// A client of its own: the lookups' client has a request timeout that would cut every watch.
	cfg = rest.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = 20, 40
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &replicator{dynamic: dyn, lookups: lookups, log: log, feeds: map[schema.GroupVersionResource]*feed{}}, nil
}

// Replicate fills inv with every object of resources, namespaced and cluster-scoped, and keeps
// it filled until stop is called. It returns once every kind's informer has listed, or with
// ctx's error (then nothing stays subscribed). The server's RBAC must let it list and watch
// those kinds, which is what declaring them in contextAwareResources grants.
func (h *Host) Replicate(ctx context.Context, resources []engine.Resource, inv *engine.Inventory) (stop func(), err error) {
	if h.replicator == nil {
		return nil, fmt.Errorf("replicate an inventory: %w", ErrNoKubernetes)
	}
	return h.replicator.subscribe(ctx, resources, inv)
}

func (r *replicator) subscribe(ctx context.Context, resources []engine.Resource, inv *engine.Inventory) (func(), error) {
	var joined []schema.GroupVersionResource
	stop := func() {
		for _, gvr := range joined {
			r.leave(gvr, inv)
		}
	}
	for _, res := range resources {
		m, err := r.lookups.mapping(res)
		if err != nil {
			stop()
			return nil, fmt.Errorf("replicate %s: %w", res, err)
		}
		f := r.join(m.Resource, res, inv)
		joined = append(joined, m.Resource)
		if !cache.WaitForCacheSync(ctx.Done(), f.informer.HasSynced) {
			stop()
			return nil, fmt.Errorf("replicate %s: the informer did not list before %w (is %s served, and may the policy server list and watch it?)", res, context.Cause(ctx), m.Resource)
		}
		f.seed(inv)
	}
	return stop, nil
}

// join adds inv to the kind's feed, starting its informer if it is the first.
func (r *replicator) join(gvr schema.GroupVersionResource, res engine.Resource, inv *engine.Inventory) *feed {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.feeds[gvr]
	if !ok {
		f = &feed{apiVersion: res.APIVersion, kind: res.Kind, stop: make(chan struct{}), subscribers: map[*engine.Inventory]int{}}
		f.informer = dynamicinformer.NewFilteredDynamicInformer(r.dynamic, gvr, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
		_ = f.informer.SetTransform(stripManagedFields)
		if _, err := f.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    f.upsert,
			UpdateFunc: func(_, obj any) { f.upsert(obj) },
			DeleteFunc: f.delete,
		}); err != nil {
			r.log.Error(err, "inventory informer handler", "resource", gvr.String())
		}
		go f.informer.Run(f.stop)
		r.feeds[gvr] = f
		r.log.V(1).Info("replicating a kind into Gatekeeper inventories", "resource", gvr.String())
	}
	f.mu.Lock()
	// Joined but not yet seeded (0): events reach it only once seeded, so it never sees a
	// change before the state the change applies to.
	if _, ok := f.subscribers[inv]; !ok {
		f.subscribers[inv] = 0
	}
	f.mu.Unlock()
	return f
}

// leave removes inv from the kind's feed, stopping the informer when none is left.
func (r *replicator) leave(gvr schema.GroupVersionResource, inv *engine.Inventory) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f, ok := r.feeds[gvr]
	if !ok {
		return
	}
	f.mu.Lock()
	delete(f.subscribers, inv)
	empty := len(f.subscribers) == 0
	f.mu.Unlock()
	if empty {
		close(f.stop)
		delete(r.feeds, gvr)
	}
}

// seed copies the informer's store into inv and from then on forwards events to it.
func (f *feed) seed(inv *engine.Inventory) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, obj := range f.informer.GetStore().List() {
		f.upsertInto(inv, obj)
	}
	f.subscribers[inv] = 1
}

func (f *feed) upsert(obj any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for inv, seeded := range f.subscribers {
		if seeded > 0 {
			f.upsertInto(inv, obj)
		}
	}
}

func (f *feed) delete(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for inv, seeded := range f.subscribers {
		if seeded > 0 {
			// The declared apiVersion, as the object was filed under it.
			inv.Delete(f.apiVersion, f.kind, u.GetNamespace(), u.GetName())
		}
	}
}

func (f *feed) upsertInto(inv *engine.Inventory, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	if u.GetAPIVersion() == "" || u.GetKind() == "" {
		u = u.DeepCopy() // the store's copy is shared
		u.SetAPIVersion(f.apiVersion)
		u.SetKind(f.kind)
	}
	b, err := u.MarshalJSON()
	if err != nil {
		return
	}
	_ = inv.Upsert(b) // an object from the apiserver has apiVersion, kind and name
}

// stripManagedFields drops what no constraint reads and what makes up much of an object's size.
func stripManagedFields(obj any) (any, error) {
	if u, ok := obj.(*unstructured.Unstructured); ok {
		u.SetManagedFields(nil)
	}
	return obj, nil
}
