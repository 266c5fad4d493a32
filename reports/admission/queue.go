package admission

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/reports"
)

// Results an Evaluation can carry: the policy accepted the request, rejected it, or failed.
const (
	Pass  openreportsv1alpha1.Result = "pass"
	Fail  openreportsv1alpha1.Result = "fail"
	Error openreportsv1alpha1.Result = "error"
)

// ResultSource is the source of every result the queue writes, as the aggregator names its
// Reports' source.
const ResultSource = "regent"

// Defaults of Options.
const (
	DefaultCapacity = 1024
	DefaultMaxBytes = 32 << 20
	DefaultWorkers  = 2
	DefaultDelay    = time.Second
	// maxAttempts bounds the writes of one batch that fail (the apiserver away, a conflicting
	// create by the background scan); after that the background scan reports the resource.
	maxAttempts  = 3
	writeTimeout = 10 * time.Second
)

// Evaluation is one policy's answer to one admission request, as the request path hands it over.
type Evaluation struct {
	// Request is the AdmissionRequest as kube-apiserver sent it. The queue keeps the slice
	// (the caller must not reuse it) and reads it off the request path.
	Request []byte
	Policy  reports.PolicyRef
	// Version is the policy version the answer came from: its generation.
	Version string
	// Monitor says the policy answered in monitor mode, whose results are of severity info.
	Monitor bool
	Result  openreportsv1alpha1.Result
	Message string
}

// Options configure a Queue.
type Options struct {
	// Client writes the reports.
	Client client.Client
	// Capacity bounds both the answers waiting to be read and the resources waiting to be
	// written (default DefaultCapacity); MaxBytes bounds the requests the unread answers hold
	// (default DefaultMaxBytes). Beyond either, Offer drops the answer and counts it.
	Capacity int
	MaxBytes int64
	// Workers write reports at once (default DefaultWorkers).
	Workers int
	// Delay is how long a resource's first answer waits for more before its report is written
	// (default DefaultDelay): a burst of updates costs one write.
	Delay time.Duration
	// Annotations returns the annotations of the policy an answer is reported under (namespace
	// is the resource's, which is a namespaced policy's own), nil when not known. The results are
	// classified by them (reports.Classify: Kubewarden's severity and category) and recorded at
	// the version they give (reports.Version), the one the background scan computes too; with no
	// Annotations, only a monitor-mode policy's severity is known.
	Annotations func(policy reports.PolicyRef, namespace string) map[string]string
	// Registerer takes the queue's metrics (default: a registry of its own).
	Registerer prometheus.Registerer
	Clock      clock.Clock
	Logger     logr.Logger
}

func (o Options) withDefaults() (Options, error) {
	if o.Client == nil {
		return o, errors.New("admission reports: no client")
	}
	if o.Capacity <= 0 {
		o.Capacity = DefaultCapacity
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = DefaultMaxBytes
	}
	if o.Workers <= 0 {
		o.Workers = DefaultWorkers
	}
	if o.Delay <= 0 {
		o.Delay = DefaultDelay
	}
	if o.Registerer == nil {
		o.Registerer = prometheus.NewRegistry()
	}
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if o.Logger.GetSink() == nil {
		o.Logger = logr.Discard()
	}
	return o, nil
}

// Queue collects admission answers and writes them as reports; see the package documentation.
type Queue struct {
	opts    Options
	metrics *metrics

	intake      chan Evaluation
	intakeBytes atomic.Int64
	// wake tells an idle writer that a resource is waiting.
	wake chan struct{}

	mu      sync.Mutex
	recent  *recentAnswers
	pending map[types.UID]*resourceResults
	// order holds the pending resources not being written, oldest first: with one Delay for
	// all, the first is always the first due.
	order []types.UID
	// busy are the resources a writer is writing. Their newer answers wait out of order until
	// the write ends, so two writers never race on one report.
	busy map[types.UID]bool
	// written is what the last write of each resource left in its report for each policy
	// (writers only): an answer equal to it needs no request at all. Most admission answers
	// repeat the last one, and the read Apply needs to compare would otherwise cost the
	// apiserver one GET per resource per Delay. Bounded: cleared when it outgrows writtenMax.
	writtenMu sync.Mutex
	written   map[types.UID]map[reports.PolicyRef]policyResult
}

// resourceResults are the latest answer of each policy for one resource.
type resourceResults struct {
	resource reports.Resource
	byPolicy map[reports.PolicyRef]policyResult
	due      time.Time
	attempts int
}

type policyResult struct {
	version string
	result  openreportsv1alpha1.ReportResult
}

// New returns a queue; Run makes it write.
func New(opts Options) (*Queue, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, fmt.Errorf("admission reports: %w", err)
	}
	return &Queue{
		opts: opts, metrics: m,
		intake: make(chan Evaluation, opts.Capacity), wake: make(chan struct{}, 1),
		// Four answers per queued resource: a request twice for each of two policies.
		recent:  newRecentAnswers(4 * opts.Capacity),
		pending: map[types.UID]*resourceResults{}, busy: map[types.UID]bool{},
		written: map[types.UID]map[reports.PolicyRef]policyResult{},
	}, nil
}

// Offer hands an answer over without blocking; false means it was dropped (counted) because the
// queue is full.
func (q *Queue) Offer(e Evaluation) bool {
	q.metrics.offered.Inc()
	n := int64(len(e.Request))
	if q.intakeBytes.Add(n) > q.opts.MaxBytes {
		q.intakeBytes.Add(-n)
		q.metrics.dropped.Inc()
		return false
	}
	select {
	case q.intake <- e:
		return true
	default:
		q.intakeBytes.Add(-n)
		q.metrics.dropped.Inc()
		return false
	}
}

// Run reads the offered answers and writes reports until ctx is done; what is still waiting
// then is dropped (the background scan reports those resources).
func (q *Queue) Run(ctx context.Context) {
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-q.intake:
				q.intakeBytes.Add(-int64(len(e.Request)))
				q.add(e)
			}
		}
	})
	for range q.opts.Workers {
		wg.Go(func() {
			for {
				p, ok := q.next(ctx)
				if !ok {
					return
				}
				q.done(p, q.write(ctx, p))
			}
		})
	}
	wg.Wait()
}

// add files an answer under its resource: the latest answer of a policy replaces an earlier one.
func (q *Queue) add(e Evaluation) {
	request, res, skip, err := resourceOf(e.Request)
	if err != nil {
		q.opts.Logger.V(1).Info("answer not reported", "policy", e.Policy.Name, "error", err.Error())
	}
	if skip != "" {
		q.metrics.skipped.WithLabelValues(skip).Inc()
		return
	}
	var annotations map[string]string
	if q.opts.Annotations != nil {
		annotations = q.opts.Annotations(e.Policy, res.Namespace)
	}
	class, _ := reports.Classify(annotations, e.Monitor)
	r := policyResult{version: reports.Version(e.Version, annotations), result: openreportsv1alpha1.ReportResult{
		Source: ResultSource, Rule: e.Policy.Name, Result: e.Result, Description: e.Message, Scored: true,
	}}
	class.Stamp(&r.result)
	q.mu.Lock()
	defer q.mu.Unlock()
	if request != "" && !q.recent.add(answerKey{request: request, policy: e.Policy}) {
		q.metrics.skipped.WithLabelValues(skipDuplicate).Inc()
		return
	}
	if p := q.pending[res.UID]; p != nil {
		p.resource = res
		p.byPolicy[e.Policy] = r
		q.metrics.queued.Inc()
		q.metrics.coalesced.Inc()
		return
	}
	if len(q.pending) >= q.opts.Capacity {
		q.metrics.dropped.Inc()
		return
	}
	q.pending[res.UID] = &resourceResults{
		resource: res, byPolicy: map[reports.PolicyRef]policyResult{e.Policy: r},
		due: q.opts.Clock.Now().Add(q.opts.Delay),
	}
	q.metrics.queued.Inc()
	q.metrics.pending.Set(float64(len(q.pending)))
	if !q.busy[res.UID] {
		q.order = append(q.order, res.UID)
		nudge(q.wake)
	}
}

// next waits for the first resource whose results are due and takes it; false when ctx ends.
func (q *Queue) next(ctx context.Context) (*resourceResults, bool) {
	q.mu.Lock()
	for {
		if ctx.Err() != nil {
			q.mu.Unlock()
			return nil, false
		}
		if len(q.order) == 0 {
			q.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil, false
			case <-q.wake:
			}
			q.mu.Lock()
			continue
		}
		uid := q.order[0]
		p := q.pending[uid]
		if wait := p.due.Sub(q.opts.Clock.Now()); wait > 0 {
			q.mu.Unlock()
			t := q.opts.Clock.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, false
			case <-t.C():
			}
			q.mu.Lock()
			continue
		}
		q.order = q.order[1:]
		delete(q.pending, uid)
		q.busy[uid] = true
		q.metrics.pending.Set(float64(len(q.pending)))
		if len(q.order) > 0 {
			nudge(q.wake) // another idle writer may take the next one
		}
		q.mu.Unlock()
		return p, true
	}
}

// writtenMax bounds the resources whose last written results the queue remembers.
const writtenMax = 16384

// write applies a resource's results to its report, skipping the policies whose result is what
// the last write left there.
func (q *Queue) write(ctx context.Context, p *resourceResults) error {
	uid := p.resource.UID
	q.writtenMu.Lock()
	last := q.written[uid]
	q.writtenMu.Unlock()
	set := make([]reports.PolicyResults, 0, len(p.byPolicy))
	for ref, r := range p.byPolicy {
		if prev, ok := last[ref]; ok && prev.version == r.version && equality.Semantic.DeepEqual(prev.result, r.result) {
			continue
		}
		set = append(set, reports.PolicyResults{Policy: ref, Version: r.version, Results: []openreportsv1alpha1.ReportResult{r.result}})
	}
	if len(set) == 0 {
		q.metrics.writes.WithLabelValues("known").Inc()
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	changed, err := reports.Apply(ctx, q.opts.Client, p.resource, reportsv1alpha1.SourceAdmission, set, nil)
	switch {
	case err != nil:
		q.metrics.writes.WithLabelValues("error").Inc()
		q.opts.Logger.Error(err, "admission results not written", "attempt", p.attempts+1)
		return err
	case changed:
		q.metrics.writes.WithLabelValues("written").Inc()
	default:
		q.metrics.writes.WithLabelValues("unchanged").Inc()
	}
	q.writtenMu.Lock()
	defer q.writtenMu.Unlock()
	if len(q.written) >= writtenMax {
		q.written = map[types.UID]map[reports.PolicyRef]policyResult{}
	}
	if q.written[uid] == nil {
		q.written[uid] = map[reports.PolicyRef]policyResult{}
	}
	for ref, r := range p.byPolicy {
		q.written[uid][ref] = r
	}
	return nil
}

// done ends a write. A failed batch waits again, under any newer answers of its resource,
// unless it failed too often or its namespace is gone; newer answers that came during the write
// queue up now.
func (q *Queue) done(p *resourceResults, err error) {
	q.mu.Lock()
	defer q.mu.Unlock()
	uid := p.resource.UID
	delete(q.busy, uid)
	if err != nil && p.attempts+1 < maxAttempts && !apierrors.IsNotFound(err) {
		if newer := q.pending[uid]; newer != nil {
			for ref, r := range p.byPolicy {
				if _, ok := newer.byPolicy[ref]; !ok {
					newer.byPolicy[ref] = r
				}
			}
		} else if len(q.pending) < q.opts.Capacity {
			// One Delay like any new answer: order stays sorted by due time.
			p.attempts++
			p.due = q.opts.Clock.Now().Add(q.opts.Delay)
			q.pending[uid] = p
			q.metrics.pending.Set(float64(len(q.pending)))
		}
	}
	if _, ok := q.pending[uid]; ok {
		q.order = append(q.order, uid)
		nudge(q.wake)
	}
}

func nudge(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
