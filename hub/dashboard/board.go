package dashboard

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// tick is how often a model whose texts count down (deadlines, soak times) is rebuilt without a
// change to watch.
const tick = 5 * time.Second

// settle is how long the board waits after a change before rebuilding the model: a rollout step
// changes a root and many replicas within milliseconds, and one rebuild covers them all.
const settle = 200 * time.Millisecond

// Board keeps the model built from the hub's cache and tells the open pages when it changes. It
// is a manager Runnable; it runs on every hub replica, the leader or not, since it only reads.
type Board struct {
	cache cache.Cache
	// replicas is the hub's replica cache (hub.Manager.Replicas), when cache does not hold them.
	replicas cache.Cache
	clock    clock.Clock
	log      logr.Logger

	dirty chan struct{}
	// stopped closes when Start returns, ending the open event streams with the hub.
	stopped chan struct{}

	mu      sync.Mutex
	model   *Model
	changed chan struct{}
}

// NewBoard reads from c, the hub manager's cache. clk dates the model (soak and deadline times);
// the real clock when nil.
func NewBoard(c cache.Cache, clk clock.Clock, log logr.Logger) *Board {
	if clk == nil {
		clk = clock.RealClock{}
	}
	return &Board{cache: c, clock: clk, log: log, dirty: make(chan struct{}, 1), stopped: make(chan struct{}),
		model: Build(Inputs{Now: clk.Now()}), changed: make(chan struct{})}
}

// WithReplicas has the board read the replicas from c as well, the hub's replica cache, whose
// objects are propagator.CachedReplicas. Called before Start.
func (b *Board) WithReplicas(c cache.Cache) *Board {
	b.replicas = c
	return b
}

// NeedLeaderElection is false: every hub replica serves the dashboard from its own cache.
func (b *Board) NeedLeaderElection() bool { return false }

// Start watches the cache's Policies, PlacementDecisions and Reports and rebuilds the model after
// each burst of changes until ctx ends.
func (b *Board) Start(ctx context.Context) error {
	defer close(b.stopped)
	type watched struct {
		c   cache.Cache
		obj client.Object
	}
	watches := []watched{{b.cache, &policyv1.Policy{}}, {b.cache, &clusterv1beta1.PlacementDecision{}}, {b.cache, &openreportsv1alpha1.Report{}}}
	if b.replicas != nil {
		watches = append(watches, watched{b.replicas, &policyv1.Policy{}})
	}
	for _, w := range watches {
		obj := w.obj
		inf, err := w.c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("dashboard: informer for %T: %w", obj, err)
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { b.markDirty() },
			UpdateFunc: func(any, any) { b.markDirty() },
			DeleteFunc: func(any) { b.markDirty() },
		}); err != nil {
			return fmt.Errorf("dashboard: watch %T: %w", obj, err)
		}
	}
	if !b.cache.WaitForCacheSync(ctx) || (b.replicas != nil && !b.replicas.WaitForCacheSync(ctx)) {
		return nil
	}
	b.markDirty()
	for {
		var refresh <-chan time.Time
		if m, _ := b.Current(); m.Ticking {
			refresh = b.clock.After(tick)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-b.dirty:
		case <-refresh:
		}
		select {
		case <-ctx.Done():
			return nil
		case <-b.clock.After(settle):
		}
		if err := b.rebuild(ctx); err != nil {
			// The cache answers from memory; an error here is a missing kind, logged and retried
			// with the next change.
			b.log.Error(err, "dashboard: rebuild")
		}
	}
}

func (b *Board) markDirty() {
	select {
	case b.dirty <- struct{}{}:
	default:
	}
}

// rebuild reads the cache without copies: Build only reads the objects.
func (b *Board) rebuild(ctx context.Context) error {
	var policies policyv1.PolicyList
	if err := b.cache.List(ctx, &policies, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list policies: %w", err)
	}
	if err := b.addReplicas(ctx, &policies); err != nil {
		return err
	}
	var decisions clusterv1beta1.PlacementDecisionList
	if err := b.cache.List(ctx, &decisions, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list placement decisions: %w", err)
	}
	var reports openreportsv1alpha1.ReportList
	if err := b.cache.List(ctx, &reports, client.MatchingLabels{rolledUpByLabel: rolledUpBy}, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list reports: %w", err)
	}
	m := Build(Inputs{Policies: policies.Items, Decisions: decisions.Items, Reports: reports.Items, Now: b.clock.Now()})
	b.mu.Lock()
	b.model = m
	close(b.changed)
	b.changed = make(chan struct{})
	b.mu.Unlock()
	return nil
}

// withDetails is a replica as the hub's replica cache holds it (propagator.CachedReplica).
type withDetails interface {
	HasDetails() bool
	Policy() *policyv1.Policy
}

// addReplicas adds to policies the replicas of the replica cache that the model reads: those with
// status details (admission policies' serving generations). The others, nearly all of a large
// fleet, are not copied.
func (b *Board) addReplicas(ctx context.Context, policies *policyv1.PolicyList) error {
	if b.replicas == nil {
		return nil
	}
	inf, err := b.replicas.GetInformer(ctx, &policyv1.Policy{})
	if err != nil {
		return fmt.Errorf("replica informer: %w", err)
	}
	withIndexer, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return fmt.Errorf("replica informer %T has no indexer", inf)
	}
	for _, o := range withIndexer.GetIndexer().List() {
		if r, ok := o.(withDetails); ok && r.HasDetails() {
			policies.Items = append(policies.Items, *r.Policy())
		}
	}
	return nil
}

// Current returns the model and a channel closed when a newer one replaces it.
func (b *Board) Current() (*Model, <-chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.model, b.changed
}
