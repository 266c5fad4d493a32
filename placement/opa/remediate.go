package opa

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// PlacementsGVR is OCM's Placement.
var PlacementsGVR = schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1beta1", Resource: "placements"}

// DefaultRemediationDelay batches the changes of one burst (a policy edit, a cluster relabelled
// along with its claims) into one re-evaluation.
const DefaultRemediationDelay = 200 * time.Millisecond

var (
	remediations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "regent_placement_remediations_total",
		Help: "Placements whose spec/annotations the remediator changed (or would change, dry_run=true), and failures.",
	}, []string{"result", "dry_run"})
	remediationPassSeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "regent_placement_remediation_pass_duration_seconds",
		Help:    "Time one re-evaluation pass takes, patches included.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10),
	})
	remediationEvaluated = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "regent_placement_remediation_evaluated_total",
		Help: "Placements re-evaluated by the remediator.",
	})
)

func init() {
	metrics.Registry.MustRegister(remediations, remediationPassSeconds, remediationEvaluated)
}

// Remediator re-evaluates Placements when what their answer may depend on changes and applies
// the new answer with the webhook's merge. A change of the loaded policies or of the replicated
// inventory re-evaluates every Placement; a Placement's own create or spec/annotation change
// re-evaluates that one (it covers Placements admitted while the webhook was unreachable).
//
// Why all and not an index of what each answer read: an answer's dependencies are the data paths
// its evaluation touched, and the placement policies this is for iterate the whole inventory ("the
// EU clusters with PCI ≥ 2"), so every cluster change is a dependency of every Placement the
// policy covers and an index would select them all anyway, at the cost of tracing every
// evaluation. One evaluation is a prepared in-memory query (see BenchmarkRemediationPass), so a
// pass over every Placement is bounded by their count and batched per DefaultRemediationDelay.
type Remediator struct {
	evaluator *evaluator
	client    dynamic.Interface
	recorder  record.EventRecorder
	dryRun    bool
	delay     time.Duration

	informer cache.SharedIndexInformer

	mu      sync.Mutex
	all     bool
	pending map[string]bool
	wake    chan struct{}
	// reported is, per Placement UID, the policy errors (or the failure) last reported in an
	// Event, so a pass that finds the same again does not repeat it.
	reported map[types.UID]string
}

// NewRemediator applies answers through client (or, with dryRun, only reports them).
func NewRemediator(ev *evaluator, client dynamic.Interface, recorder record.EventRecorder, dryRun bool) *Remediator {
	return &Remediator{
		evaluator: ev, client: client, recorder: recorder, dryRun: dryRun, delay: DefaultRemediationDelay,
		pending: map[string]bool{}, wake: make(chan struct{}, 1), reported: map[types.UID]string{},
	}
}

// Watch subscribes the remediator to the engine's policy reloads and inventory writes.
func (r *Remediator) Watch(ctx context.Context, engine *Engine) error {
	engine.state.Lock()
	engine.onSwap = append(engine.onSwap, r.NotifyAll)
	engine.state.Unlock()
	store := engine.Store()
	txn, err := store.NewTransaction(ctx, storage.WriteParams)
	if err != nil {
		return err
	}
	if _, err := store.Register(ctx, txn, storage.TriggerConfig{OnCommit: func(_ context.Context, _ storage.Transaction, ev storage.TriggerEvent) {
		for _, d := range ev.Data {
			if len(d.Path) > 0 && d.Path[0] == InventoryRoot {
				r.NotifyAll()
				return
			}
		}
	}}); err != nil {
		store.Abort(ctx, txn)
		return fmt.Errorf("remediator: watch the inventory: %w", err)
	}
	return store.Commit(ctx, txn)
}

// NotifyAll schedules a re-evaluation of every Placement.
func (r *Remediator) NotifyAll() {
	r.mu.Lock()
	r.all = true
	r.mu.Unlock()
	r.poke()
}

func (r *Remediator) notify(key string) {
	r.mu.Lock()
	r.pending[key] = true
	r.mu.Unlock()
	r.poke()
}

func (r *Remediator) poke() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Start runs the Placement informer; Run does the work.
func (r *Remediator) Start(ctx context.Context) error {
	factory := dynamicinformer.NewDynamicSharedInformerFactory(r.client, 0)
	r.informer = factory.ForResource(PlacementsGVR).Informer()
	if _, err := r.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
				r.notify(key)
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*unstructured.Unstructured)
			n, ok2 := newObj.(*unstructured.Unstructured)
			// Status writes (OCM's controller, every decision change) cannot change an answer.
			if ok1 && ok2 && o.GetGeneration() == n.GetGeneration() && reflect.DeepEqual(o.GetAnnotations(), n.GetAnnotations()) &&
				reflect.DeepEqual(o.GetLabels(), n.GetLabels()) {
				return
			}
			if key, err := cache.MetaNamespaceKeyFunc(newObj); err == nil {
				r.notify(key)
			}
		},
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if u, ok := obj.(*unstructured.Unstructured); ok {
				r.setReported(u.GetUID(), "")
			}
		},
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), r.informer.HasSynced) {
		return fmt.Errorf("remediator: Placement cache did not sync: %w", ctx.Err())
	}
	return nil
}

// Run re-evaluates on every notification until ctx ends.
func (r *Remediator) Run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		}
		// Batch what arrives during the delay into this pass.
		select {
		case <-ctx.Done():
			return
		case <-time.After(r.delay):
		}
		r.mu.Lock()
		all, pending := r.all, r.pending
		r.all, r.pending = false, map[string]bool{}
		r.mu.Unlock()

		var objs []map[string]any
		for _, o := range r.informer.GetStore().List() {
			u, ok := o.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			if key, _ := cache.MetaNamespaceKeyFunc(u); all || pending[key] {
				objs = append(objs, u.Object)
			}
		}
		start := time.Now()
		r.pass(ctx, objs)
		remediationPassSeconds.Observe(time.Since(start).Seconds())
	}
}

// change is what one Placement's answer asks of it.
type change struct {
	obj, merged map[string]any
	changed     bool
	errors      []string
	err         error
}

// plan evaluates each Placement as the webhook would evaluate an update of it, and merges.
func (r *Remediator) plan(ctx context.Context, objs []map[string]any) []change {
	out := make([]change, 0, len(objs))
	for _, obj := range objs {
		remediationEvaluated.Inc()
		ans, err := r.evaluator.evaluate(ctx, "UPDATE", obj)
		if err != nil {
			out = append(out, change{obj: obj, err: err})
			continue
		}
		merged, changed, err := mergeAnswer(obj, ans)
		out = append(out, change{obj: obj, merged: merged, changed: changed, errors: ans.Errors, err: err})
	}
	return out
}

func (r *Remediator) pass(ctx context.Context, objs []map[string]any) {
	log := klog.FromContext(ctx)
	dry := fmt.Sprint(r.dryRun)
	for _, c := range r.plan(ctx, objs) {
		u := &unstructured.Unstructured{Object: c.obj}
		name := u.GetNamespace() + "/" + u.GetName()
		if c.err != nil {
			remediations.WithLabelValues("failed", dry).Inc()
			// Every inventory change re-evaluates: say each distinct failure once.
			if msg := "failed: " + c.err.Error(); msg != r.lastReported(u.GetUID()) {
				r.setReported(u.GetUID(), msg)
				r.recorder.Eventf(u, corev1.EventTypeWarning, ReasonEvalFailed, "re-evaluate the placement policy: %v", c.err)
				log.Error(c.err, "re-evaluate placement", "placement", name)
			}
			continue
		}
		if msg := strings.Join(c.errors, "; "); msg != r.lastReported(u.GetUID()) {
			r.setReported(u.GetUID(), msg)
			if msg != "" {
				r.recorder.Eventf(u, corev1.EventTypeWarning, ReasonNonCompliant, "the placement policy no longer allows this Placement as written: %s", msg)
			}
		}
		if !c.changed {
			continue
		}
		what := describeChange(c.obj, c.merged)
		if r.dryRun {
			remediations.WithLabelValues("would_change", dry).Inc()
			r.recorder.Eventf(u, corev1.EventTypeNormal, ReasonWouldRemediate, "dry run: the placement policy would change %s", what)
			log.Info("dry run: placement would be remediated", "placement", name, "change", what)
			continue
		}
		if err := r.apply(ctx, u, c.merged); err != nil {
			remediations.WithLabelValues("failed", dry).Inc()
			if apierrors.IsNotFound(err) {
				continue
			}
			if apierrors.IsConflict(err) {
				// Someone wrote it in between, most often OCM's placement controller updating
				// its status, an update the informer's handler ignores: evaluate it again
				// from the newer version in the next pass.
				r.notify(name)
				continue
			}
			r.recorder.Eventf(u, corev1.EventTypeWarning, ReasonEvalFailed, "apply the placement policy's new answer: %v", err)
			log.Error(err, "remediate placement", "placement", name)
			continue
		}
		remediations.WithLabelValues("changed", dry).Inc()
		r.recorder.Eventf(u, corev1.EventTypeNormal, ReasonRemediated, "the placement policy's answer changed: %s", what)
	}
}

func (r *Remediator) lastReported(uid types.UID) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.reported[uid]
}

func (r *Remediator) setReported(uid types.UID, msg string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if msg == "" {
		delete(r.reported, uid)
		return
	}
	r.reported[uid] = msg
}

// apply writes the merged annotations and predicates with a merge patch pinned to the
// resourceVersion that was evaluated, so a concurrent author edit is never overwritten. The patch
// passes the webhook, which computes the same answer and so changes nothing more.
func (r *Remediator) apply(ctx context.Context, u *unstructured.Unstructured, merged map[string]any) error {
	patch, err := remediationPatch(u.Object, merged)
	if err != nil {
		return err
	}
	_, err = r.client.Resource(PlacementsGVR).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "regent-placement"})
	return err
}

// remediationPatch is the JSON merge patch from obj to merged over what mergeAnswer touches:
// annotations and spec.predicates.
func remediationPatch(obj, merged map[string]any) ([]byte, error) {
	before, after := annotationsOf(obj), annotationsOf(merged)
	ann := map[string]any{}
	for k, v := range after {
		if before[k] != v {
			ann[k] = v
		}
	}
	for k := range before {
		if _, ok := after[k]; !ok {
			ann[k] = nil
		}
	}
	spec, _ := merged["spec"].(map[string]any)
	preds, ok := spec["predicates"]
	if !ok {
		preds = nil
	}
	md := map[string]any{"resourceVersion": (&unstructured.Unstructured{Object: obj}).GetResourceVersion()}
	if len(ann) > 0 {
		md["annotations"] = ann
	}
	return json.Marshal(map[string]any{"metadata": md, "spec": map[string]any{"predicates": preds}})
}

// describeChange says in a sentence what the remediation changes, for Events and logs.
func describeChange(obj, merged map[string]any) string {
	var parts []string
	before, after := annotationsOf(obj), annotationsOf(merged)
	var keys []string
	for k, v := range after {
		if k != AppliedAnnotation && before[k] != v {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	if len(keys) > 0 {
		parts = append(parts, "annotations "+strings.Join(keys, ", "))
	}
	if p, err := specPredicates(merged); err == nil {
		if q, err := specPredicates(obj); err == nil && !samePredicates(p, q) {
			raw, _ := json.Marshal(p)
			parts = append(parts, "spec.predicates to "+string(raw))
		}
	}
	if len(parts) == 0 {
		return "Regent's record " + AppliedAnnotation
	}
	return strings.Join(parts, " and ")
}
