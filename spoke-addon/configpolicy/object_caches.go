package configpolicy

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
)

// DefaultMaxNamespacesPerKind is how many namespaces a kind is watched in one by one before it is
// watched across the cluster instead. Below it a policy's namespaces cost a watch each and hold
// only their own objects; past it one watch is cheaper than the many.
const DefaultMaxNamespacesPerKind = 64

// objectCaches hold the objects policies name, in caches scoped to the namespaces they name. A
// cluster-wide informer per kind held every object of the kind, so a policy that names one
// ConfigMap made the addon hold all of the cluster's (with 5,000 unrelated 8 KiB ConfigMaps, 263
// MiB instead of ~115; a Helm cluster's release Secrets the same). Cluster-scoped kinds, reads
// across all namespaces, and kinds named in more than maxPerKind namespaces use one cluster-wide
// cache. A scope no policy names any more is stopped, so what is held follows the policies.
//
// Each cache's informers are also the watches that re-evaluate policies (watch registers the
// controller's event source on them), so a read never sees older state than the event that
// caused it.
type objectCaches struct {
	config     *rest.Config
	base       cache.Options
	maxPerKind int
	// watch makes the controller re-evaluate policies on the events of c's informer of gvk.
	watch func(c cache.Cache, gvk schema.GroupVersionKind) error

	started chan struct{}
	ctx     context.Context

	mu       sync.Mutex
	caches   map[string]*scopedCache // by namespace; "" is the cluster-wide one
	users    map[scope]map[types.NamespacedName]bool
	byPolicy map[types.NamespacedName]map[scope]bool
	wide     map[schema.GroupVersionKind]bool // kinds watched cluster-wide for their namespaces
}

// scope is one kind in one namespace ("" for a cluster-scoped kind, or every namespace).
type scope struct {
	gvk       schema.GroupVersionKind
	namespace string
}

type scopedCache struct {
	cache   cache.Cache
	stop    context.CancelFunc
	watched map[schema.GroupVersionKind]bool
}

func newObjectCaches(config *rest.Config, base cache.Options, maxPerKind int) *objectCaches {
	if maxPerKind <= 0 {
		maxPerKind = DefaultMaxNamespacesPerKind
	}
	return &objectCaches{
		config: config, base: base, maxPerKind: maxPerKind,
		started:  make(chan struct{}),
		caches:   map[string]*scopedCache{},
		users:    map[scope]map[types.NamespacedName]bool{},
		byPolicy: map[types.NamespacedName]map[scope]bool{},
		wide:     map[schema.GroupVersionKind]bool{},
	}
}

// Start runs the caches until ctx ends; caches are made as policies name their scopes.
func (o *objectCaches) Start(ctx context.Context) error {
	o.mu.Lock()
	o.ctx = ctx
	close(o.started)
	o.mu.Unlock()
	<-ctx.Done()
	o.mu.Lock()
	defer o.mu.Unlock()
	for ns, c := range o.caches {
		c.stop()
		delete(o.caches, ns)
	}
	return nil
}

// NeedLeaderElection is false: the caches hold nothing until the controller, which runs only on
// the leader, names a scope.
func (o *objectCaches) NeedLeaderElection() bool { return false }

// ensure records that policy reads ref's kind in ref's namespace and makes sure a cache holds and
// watches it. Called before the read, so the events of the evaluation's own writes are seen.
func (o *objectCaches) ensure(ctx context.Context, policy types.NamespacedName, ref watchRef) error {
	select {
	case <-o.started:
	case <-ctx.Done():
		return ctx.Err()
	}
	s := scope{gvk: ref.gvk, namespace: ref.namespace}
	o.mu.Lock()
	defer o.mu.Unlock()
	known := o.users[s] != nil
	if !known {
		o.users[s] = map[types.NamespacedName]bool{}
	}
	o.users[s][policy] = true
	if o.byPolicy[policy] == nil {
		o.byPolicy[policy] = map[scope]bool{}
	}
	o.byPolicy[policy][s] = true
	if c, ok := o.caches[o.targetOf(s)]; known && ok && c.watched[s.gvk] {
		return nil
	}
	return o.reconcileLocked()
}

// set makes refs everything policy reads, releasing what it no longer does.
func (o *objectCaches) set(policy types.NamespacedName, refs []watchRef) {
	keep := map[scope]bool{}
	for _, r := range refs {
		keep[scope{gvk: r.gvk, namespace: r.namespace}] = true
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	emptied := false
	for s := range o.byPolicy[policy] {
		if keep[s] {
			continue
		}
		delete(o.users[s], policy)
		if len(o.users[s]) == 0 {
			delete(o.users, s)
			emptied = true
		}
		delete(o.byPolicy[policy], s)
	}
	if len(o.byPolicy[policy]) == 0 {
		delete(o.byPolicy, policy)
	}
	if emptied {
		if err := o.reconcileLocked(); err != nil {
			logf.FromContext(o.ctx).Error(err, "watch the objects policies name")
		}
	}
}

// forget releases everything a deleted policy read.
func (o *objectCaches) forget(policy types.NamespacedName) { o.set(policy, nil) }

// Get reads from the cache that holds key's namespace of obj's kind.
func (o *objectCaches) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	gvk, err := apiutil.GVKForObject(obj, o.base.Scheme)
	if err != nil {
		return err
	}
	c, err := o.reading(ctx, gvk, key.Namespace)
	if err != nil {
		return err
	}
	return c.Get(ctx, key, obj, opts...)
}

// List reads from the cache that holds the listed namespace of list's kind.
func (o *objectCaches) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	gvk, err := apiutil.GVKForObject(list, o.base.Scheme)
	if err != nil {
		return err
	}
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	c, err := o.reading(ctx, gvk, (&client.ListOptions{}).ApplyOptions(opts).Namespace)
	if err != nil {
		return err
	}
	return c.List(ctx, list, opts...)
}

// reading returns the cache a read of gvk in namespace goes to. A scope no policy named (nothing
// here reads one) gets a cache all the same, released at the next change of scopes.
func (o *objectCaches) reading(ctx context.Context, gvk schema.GroupVersionKind, namespace string) (cache.Cache, error) {
	select {
	case <-o.started:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	c, err := o.cacheLocked(o.targetOf(scope{gvk: gvk, namespace: namespace}))
	if err != nil {
		return nil, err
	}
	return c.cache, nil
}

// targetOf is the namespace of the cache that holds s.
func (o *objectCaches) targetOf(s scope) string {
	if o.wide[s.gvk] {
		return ""
	}
	return s.namespace
}

func (o *objectCaches) cacheLocked(namespace string) (*scopedCache, error) {
	if c, ok := o.caches[namespace]; ok {
		return c, nil
	}
	opts := o.base
	if namespace != "" {
		// A field selector, not DefaultNamespaces: that one wraps the cache in a multi-namespace
		// cache, which asks the RESTMapper whether the kind is namespaced on every read (a third
		// of an evaluation's time).
		opts.DefaultFieldSelector = fields.OneTermEqualSelector("metadata.namespace", namespace)
	}
	c, err := cache.New(o.config, opts)
	if err != nil {
		return nil, fmt.Errorf("cache of namespace %q: %w", namespace, err)
	}
	ctx, stop := context.WithCancel(o.ctx)
	go func() {
		if err := c.Start(ctx); err != nil {
			logf.FromContext(o.ctx).Error(err, "object cache stopped", "namespace", namespace)
		}
	}()
	// A cache refuses reads until it started; with no informer yet this returns once it has.
	if !c.WaitForCacheSync(ctx) {
		stop()
		return nil, fmt.Errorf("cache of namespace %q did not start", namespace)
	}
	sc := &scopedCache{cache: c, stop: stop, watched: map[schema.GroupVersionKind]bool{}}
	o.caches[namespace] = sc
	return sc, nil
}

// reconcileLocked makes the caches watch exactly what the policies' scopes need: a kind in each
// namespace it is named in, or cluster-wide once it is named in more than maxPerKind namespaces
// (and again one by one once it is down to half of that, so a count near the bound does not
// flap). New watches start before the ones they replace stop; a new informer's first list
// re-evaluates the policies looking at its objects, so nothing changed in between is missed.
func (o *objectCaches) reconcileLocked() error {
	counts := map[schema.GroupVersionKind]int{} // namespaces each named kind is read in
	for s := range o.users {
		n := counts[s.gvk]
		if s.namespace != "" {
			n++
		}
		counts[s.gvk] = n
	}
	for gvk, n := range counts {
		switch {
		case n > o.maxPerKind:
			o.wide[gvk] = true
		case n <= o.maxPerKind/2:
			delete(o.wide, gvk)
		}
	}
	for gvk := range o.wide {
		if _, named := counts[gvk]; !named {
			delete(o.wide, gvk)
		}
	}
	needed := map[scope]bool{}
	for s := range o.users {
		needed[scope{gvk: s.gvk, namespace: o.targetOf(s)}] = true
	}

	var firstErr error
	for s := range needed {
		c, err := o.cacheLocked(s.namespace)
		if err == nil && !c.watched[s.gvk] {
			if err = o.watch(c.cache, s.gvk); err == nil {
				c.watched[s.gvk] = true
			}
		}
		if err != nil && firstErr == nil {
			firstErr = fmt.Errorf("watch %s in %q: %w", s.gvk, s.namespace, err)
		}
	}
	for ns, c := range o.caches {
		for gvk := range c.watched {
			if needed[scope{gvk: gvk, namespace: ns}] {
				continue
			}
			obj := &unstructured.Unstructured{}
			obj.SetGroupVersionKind(gvk)
			if err := c.cache.RemoveInformer(o.ctx, obj); err != nil {
				logf.FromContext(o.ctx).Error(err, "stop an informer no policy needs", "namespace", ns, "kind", gvk)
			}
			delete(c.watched, gvk)
		}
		if len(c.watched) == 0 {
			c.stop()
			delete(o.caches, ns)
		}
	}
	o.countLocked()
	return firstErr
}

// countLocked publishes how many watches the caches hold, by scope.
func (o *objectCaches) countLocked() {
	namespaced, clusterWide := 0, 0
	for ns, c := range o.caches {
		if ns == "" {
			clusterWide += len(c.watched)
		} else {
			namespaced += len(c.watched)
		}
	}
	objectWatches.WithLabelValues("namespace").Set(float64(namespaced))
	objectWatches.WithLabelValues("cluster").Set(float64(clusterWide))
}

// held lists the watches the caches hold, "<kind> in <namespace>" or "<kind> cluster-wide",
// sorted.
func (o *objectCaches) held() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var out []string
	for ns, c := range o.caches {
		for gvk := range c.watched {
			if ns == "" {
				out = append(out, gvk.Kind+" cluster-wide")
			} else {
				out = append(out, gvk.Kind+" in "+ns)
			}
		}
	}
	sort.Strings(out)
	return out
}
