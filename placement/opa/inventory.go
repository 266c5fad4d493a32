package opa

import (
	"context"
	"fmt"
	"strings"

	"github.com/open-policy-agent/opa/v1/storage"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// InventoryRoot is the top of the replicated data, kube-mgmt's default replication path.
const InventoryRoot = "kubernetes"

// DefaultInventory are the hub resources placement policies read.
var DefaultInventory = []schema.GroupVersionResource{
	{Group: "cluster.open-cluster-management.io", Version: "v1", Resource: "managedclusters"},
	{Group: "cluster.open-cluster-management.io", Version: "v1beta2", Resource: "managedclustersets"},
	{Group: "cluster.open-cluster-management.io", Version: "v1beta2", Resource: "managedclustersetbindings"},
	{Group: "cluster.open-cluster-management.io", Version: "v1alpha1", Resource: "addonplacementscores"},
}

// ParseGVR reads group/version/resource as the --placement-inventory flag takes it; the core
// group is written with an empty group ("/v1/namespaces").
func ParseGVR(s string) (schema.GroupVersionResource, error) {
	parts := strings.Split(s, "/")
	if len(parts) != 3 || parts[1] == "" || parts[2] == "" {
		return schema.GroupVersionResource{}, fmt.Errorf("inventory resource %q: want group/version/resource (core group: /v1/resource)", s)
	}
	return schema.GroupVersionResource{Group: parts[0], Version: parts[1], Resource: parts[2]}, nil
}

// Inventory replicates hub objects into an engine's store, one path per object, as watch events
// arrive.
type Inventory struct {
	engine *Engine
	client dynamic.Interface
	gvrs   []schema.GroupVersionResource
}

// NewInventory replicates gvrs (DefaultInventory plus what the user configured) into engine.
func NewInventory(engine *Engine, client dynamic.Interface, gvrs []schema.GroupVersionResource) *Inventory {
	return &Inventory{engine: engine, client: client, gvrs: gvrs}
}

// Start starts the informers and waits until every resource's initial list is in the store.
func (i *Inventory) Start(ctx context.Context) error {
	// Every configured resource exists as an object from the start, so a policy counting
	// clusters sees 0, not an undefined document, on a hub that has none.
	for _, gvr := range i.gvrs {
		if err := makeDir(ctx, i.engine.store, storage.Path{InventoryRoot, gvr.Resource}); err != nil {
			return fmt.Errorf("inventory %s: %w", gvr, err)
		}
	}
	factory := dynamicinformer.NewDynamicSharedInformerFactory(i.client, 0)
	var synced []cache.InformerSynced
	for _, gvr := range i.gvrs {
		inf := factory.ForResource(gvr).Informer()
		resource := gvr.Resource
		// The informer's objects only feed the store, so its cache keeps only what the store
		// keeps: with 10,000 registered clusters the whole objects were most of the hub's heap.
		if err := inf.SetTransform(cache.TransformFunc(func(obj any) (any, error) {
			if u, ok := obj.(*unstructured.Unstructured); ok {
				u.Object = prune(resource, u.Object)
			}
			return obj, nil
		})); err != nil {
			return fmt.Errorf("inventory %s: %w", gvr, err)
		}
		if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { i.put(ctx, resource, obj) },
			UpdateFunc: func(_, obj any) { i.put(ctx, resource, obj) },
			DeleteFunc: func(obj any) { i.remove(ctx, resource, obj) },
		}); err != nil {
			return fmt.Errorf("inventory %s: %w", gvr, err)
		}
		synced = append(synced, inf.HasSynced)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("inventory: caches did not sync: %w", ctx.Err())
	}
	return nil
}

func objectPath(resource string, u *unstructured.Unstructured) storage.Path {
	if ns := u.GetNamespace(); ns != "" {
		return storage.Path{InventoryRoot, resource, ns, u.GetName()}
	}
	return storage.Path{InventoryRoot, resource, u.GetName()}
}

func (i *Inventory) put(ctx context.Context, resource string, obj any) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	path := objectPath(resource, u)
	// Already pruned by the informer's transform; the store keeps this very object (no copy), which
	// neither side mutates.
	if err := writePath(ctx, i.engine.store, path, u.Object); err != nil {
		klog.FromContext(ctx).Error(err, "replicate into placement inventory", "path", path.String())
	}
}

func (i *Inventory) remove(ctx context.Context, resource string, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return
	}
	path := objectPath(resource, u)
	if err := removePath(ctx, i.engine.store, path); err != nil {
		klog.FromContext(ctx).Error(err, "remove from placement inventory", "path", path.String())
	}
}

func writePath(ctx context.Context, store storage.Store, path storage.Path, value any) error {
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return err
	}
	if err := storage.MakeDir(ctx, store, txn, path[:len(path)-1]); err != nil {
		store.Abort(ctx, txn)
		return err
	}
	if err := store.Write(ctx, txn, storage.AddOp, path, value); err != nil {
		store.Abort(ctx, txn)
		return err
	}
	return store.Commit(ctx, txn)
}

func makeDir(ctx context.Context, store storage.Store, path storage.Path) error {
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return err
	}
	if err := storage.MakeDir(ctx, store, txn, path); err != nil {
		store.Abort(ctx, txn)
		return err
	}
	return store.Commit(ctx, txn)
}

func removePath(ctx context.Context, store storage.Store, path storage.Path) error {
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return err
	}
	if err := store.Write(ctx, txn, storage.RemoveOp, path, nil); err != nil {
		store.Abort(ctx, txn)
		if storage.IsNotFound(err) {
			return nil
		}
		return err
	}
	return store.Commit(ctx, txn)
}
