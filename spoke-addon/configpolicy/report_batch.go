package configpolicy

import (
	"context"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/reports"
)

// reportBatch holds the report changes the feed decided and not yet written, per resource, and
// writes each resource's report once for all of them: an object that 500 policies look at gets
// one write for a burst of their evaluations, not 500 writes of a report holding 500 results.
type reportBatch struct {
	client  client.Client
	queue   workqueue.TypedRateLimitingInterface[types.UID]
	workers int
	// delay is how long a change waits for others to the same resource before it is written.
	delay time.Duration

	mu      sync.Mutex
	pending map[types.UID]*resourceChanges
}

// resourceChanges are one resource's pending changes: per policy, its new results (nil = drop).
type resourceChanges struct {
	resource reports.Resource
	policies map[reports.PolicyRef]*reports.PolicyResults
}

// defaultBatchDelay is how long a resource's report changes wait for more before one write.
const defaultBatchDelay = time.Second

func newReportBatch(c client.Client, workers int, delay time.Duration) *reportBatch {
	return &reportBatch{
		client:  c,
		workers: workers,
		delay:   delay,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[types.UID](),
			workqueue.TypedRateLimitingQueueConfig[types.UID]{Name: reportsControllerName + "-writes"}),
		pending: map[types.UID]*resourceChanges{},
	}
}

// set records results (nil: drop policy) for res, replacing what was pending for that policy.
func (b *reportBatch) set(res reports.Resource, policy reports.PolicyRef, results *reports.PolicyResults) {
	b.mu.Lock()
	c := b.pending[res.UID]
	if c == nil {
		c = &resourceChanges{resource: res, policies: map[reports.PolicyRef]*reports.PolicyResults{}}
		b.pending[res.UID] = c
	}
	if res.Name != "" {
		c.resource = res
	}
	c.policies[policy] = results
	b.mu.Unlock()
	// A resource already waiting keeps its earlier time: a burst of evaluations (one object
	// change re-evaluating every policy that looks at it) becomes a few writes, never postponed.
	b.queue.AddAfter(res.UID, b.delay)
}

// pendingFor returns the resources with a pending change of policy, so a later decision of the
// policy also covers what was decided but not yet written.
func (b *reportBatch) pendingFor(policy reports.PolicyRef) map[types.UID]reports.Resource {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := map[types.UID]reports.Resource{}
	for uid, c := range b.pending {
		if _, ok := c.policies[policy]; ok {
			out[uid] = c.resource
		}
	}
	return out
}

// Start runs the writers until ctx ends (a manager Runnable).
func (b *reportBatch) Start(ctx context.Context) error {
	go func() { <-ctx.Done(); b.queue.ShutDown() }()
	var wg sync.WaitGroup
	for range b.workers {
		wg.Go(func() {
			for b.writeNext(ctx) {
			}
		})
	}
	wg.Wait()
	return nil
}

func (b *reportBatch) writeNext(ctx context.Context) bool {
	uid, shutdown := b.queue.Get()
	if shutdown {
		return false
	}
	defer b.queue.Done(uid)
	b.mu.Lock()
	c := b.pending[uid]
	delete(b.pending, uid)
	b.mu.Unlock()
	if c == nil {
		b.queue.Forget(uid)
		return true
	}
	var set []reports.PolicyResults
	var drop []reports.PolicyRef
	for policy, results := range c.policies {
		if results == nil {
			drop = append(drop, policy)
		} else {
			set = append(set, *results)
		}
	}
	changed, err := reports.Apply(ctx, b.client, c.resource, reportsv1alpha1.SourceBackground, set, drop)
	if err != nil {
		reportApplies.WithLabelValues("error").Inc()
		log.FromContext(ctx).Error(err, "report write failed; retried", "resource", c.resource.Name, "namespace", c.resource.Namespace)
		b.putBack(c)
		b.queue.AddRateLimited(uid)
		return true
	}
	reportApplies.WithLabelValues(map[bool]string{true: "written", false: "unchanged"}[changed]).Inc()
	b.queue.Forget(uid)
	return true
}

// putBack returns failed changes to pending; changes decided meanwhile are newer and win.
func (b *reportBatch) putBack(c *resourceChanges) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.pending[c.resource.UID]
	if now == nil {
		b.pending[c.resource.UID] = c
		return
	}
	for policy, results := range c.policies {
		if _, newer := now.policies[policy]; !newer {
			now.policies[policy] = results
		}
	}
}
