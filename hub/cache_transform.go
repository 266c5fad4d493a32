package hub

import (
	"sync/atomic"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

var stripManagedFields = cache.TransformStripManagedFields()

// trimPolicy keeps in the cache only what the hub reads of a Policy. A replica's compliance
// history (status.details, up to ten entries per template in OCM) is the spoke's report to humans;
// the rollout reads only its aggregate compliance and evaluated generation, and a hub caches one
// replica per cluster and root. Of the details only an admission policy's serving generation
// stays, for the dashboard (servingDetails). What is left is shared with the other replicas where
// equal (propagator.CompactReplica).
func trimPolicy(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return obj, err
	}
	if p, ok := obj.(*policyv1.Policy); ok {
		if _, replica := p.Labels[propagator.RootPolicyLabel]; replica {
			p.Status.Details = servingDetails(p.Status.Details)
			propagator.TrimReplica(p)
			propagator.CompactReplica(p)
		} else {
			propagator.CompactRoot(p)
		}
	}
	return obj, nil
}

// cacheReplica is trimPolicy for the replica cache: the trimmed replica becomes the
// propagator.CachedReplica the cache holds. A replica recorded already (client-go may hand the
// transform what it transformed before) and anything else pass through.
func cacheReplica(obj any) (any, error) {
	obj, err := trimPolicy(obj)
	if err != nil {
		return obj, err
	}
	if p, ok := obj.(*policyv1.Policy); ok {
		if _, replica := p.Labels[propagator.RootPolicyLabel]; replica {
			return propagator.NewCachedReplica(p), nil
		}
	}
	return obj, nil
}

// trimReport keeps a rolled-up Report's summary and drops its worst results: the hub reads only
// the counts, and holds one summary per cluster and policy.
func trimReport(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return obj, err
	}
	if r, ok := obj.(*openreportsv1alpha1.Report); ok {
		r.Results = nil
	}
	return obj, nil
}

// unchangedObjects lets a cache transform hand back the object a cache already holds when the
// apiserver sends it again unchanged (same UID and resourceVersion). client-go relists after a
// watch fell too far behind, and streams the whole list into a store of its own before it
// replaces the cache: without this, a relist of 150,000 replicas holds a second, equal copy of
// every one of them (~100 MB) until the replacement ends. The copy just decoded is left to the
// collector at once instead.
type unchangedObjects struct {
	store atomic.Pointer[toolscache.Store]
}

// watch makes u answer from inf's store, when inf is a client-go informer.
func (u *unchangedObjects) watch(inf any) {
	if withIndexer, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
		store := toolscache.Store(withIndexer.GetIndexer())
		u.store.Store(&store)
	}
}

// transform returns the cached object in place of obj when they are the same version of the same
// object, and next(obj) otherwise. The cached object comes back untouched: it may be read
// concurrently, and client-go transforms again what a relist replaces the cache with.
func (u *unchangedObjects) transform(next toolscache.TransformFunc) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		o, ok := obj.(client.Object)
		store := u.store.Load()
		if !ok || store == nil || o.GetResourceVersion() == "" {
			return next(obj)
		}
		key, err := toolscache.MetaNamespaceKeyFunc(o)
		if err != nil {
			return next(obj)
		}
		cached, exists, err := (*store).GetByKey(key)
		if err != nil || !exists {
			return next(obj)
		}
		if c, ok := cached.(client.Object); ok && c.GetUID() == o.GetUID() && c.GetResourceVersion() == o.GetResourceVersion() {
			return cached, nil
		}
		return next(obj)
	}
}
