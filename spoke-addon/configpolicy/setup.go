package configpolicy

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// controllerName names the controller, its event reporter and its field manager.
const controllerName = "configuration-policy-controller"

// Options tune the controller; the zero value is production's.
type Options struct {
	// Clock stamps lastEvaluated and condition times; the real clock when nil.
	Clock clock.PassiveClock
	// MaxConcurrentReconciles is how many policies are evaluated at once; 4 when zero.
	MaxConcurrentReconciles int

	// observe, for tests, is called after each successful evaluation.
	observe func(policy types.NamespacedName, statusWritten bool)
}

// SetupWithManager adds the ConfigurationPolicy controller to mgr. The manager's scheme must know
// policy.open-cluster-management.io/v1 (regent.dev/regent/api/scheme does).
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.MaxConcurrentReconciles == 0 {
		opts.MaxConcurrentReconciles = 4
	}
	r := &Reconciler{
		client:   mgr.GetClient(),
		index:    newWatchIndex(),
		recorder: mgr.GetEventRecorder(controllerName),
		clock:    opts.Clock,
		observe:  opts.observe,
	}
	w := &kindWatches{cache: mgr.GetCache(), index: r.index, started: map[schema.GroupVersionKind]bool{}}
	r.eval = &evaluator{reader: mgr.GetCache(), writer: client.WithFieldOwner(mgr.GetClient(), controllerName), mapper: mgr.GetRESTMapper(), watch: w.ensure}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		// Status writes bump no generation; without this filter every write would re-evaluate.
		// A deletion must reach the reconciler too: pruning runs on it.
		For(&policyv1.ConfigurationPolicy{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deleting{}))).
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.onNamespace)).
		WatchesMetadata(&apiextensionsv1.CustomResourceDefinition{}, handler.EnqueueRequestsFromMapFunc(r.onCRD)).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}).
		Build(r)
	if err != nil {
		return fmt.Errorf("build %s: %w", controllerName, err)
	}
	w.controller = c
	if err := registerGovernanceMetrics(metrics.Registry, governanceCollector{cache: mgr.GetCache(), log: mgr.GetLogger()}); err != nil {
		return fmt.Errorf("cluster_policy_governance_info: %w", err)
	}
	return nil
}

// onNamespace re-evaluates the policies with namespaced templates: a new, deleted or relabelled
// namespace can change which namespaces a selector chooses, or make an enforce possible.
func (r *Reconciler) onNamespace(context.Context, client.Object) []reconcile.Request {
	return requests(r.index.matching(func(o policyOutcome) bool { return o.usesNamespaces }))
}

// onCRD re-evaluates the policies that named a kind the cluster did not serve: the new CRD may be
// it.
func (r *Reconciler) onCRD(context.Context, client.Object) []reconcile.Request {
	return requests(r.index.matching(func(o policyOutcome) bool { return o.unmapped }))
}

func requests(policies []types.NamespacedName) []reconcile.Request {
	out := make([]reconcile.Request, len(policies))
	for i, p := range policies {
		out[i] = reconcile.Request{NamespacedName: p}
	}
	return out
}

// kindWatches starts one watch per kind the first time a policy names it. The watch shares its
// informer with the cache the evaluator reads from, so a policy is re-evaluated on the same
// events that update what it reads.
type kindWatches struct {
	mu         sync.Mutex
	cache      cache.Cache
	controller controller.Controller
	index      *watchIndex
	started    map[schema.GroupVersionKind]bool
}

func (w *kindWatches) ensure(policy types.NamespacedName, ref watchRef) error {
	w.index.add(policy, ref)
	gvk := ref.gvk
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.started[gvk] {
		return nil
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	lookingAt := func(_ context.Context, o client.Object) []reconcile.Request {
		return requests(w.index.lookingAt(gvk, o.GetName()))
	}
	if err := w.controller.Watch(source.Kind[client.Object](w.cache, obj, handler.EnqueueRequestsFromMapFunc(lookingAt))); err != nil {
		return err
	}
	w.started[gvk] = true
	return nil
}

// deleting passes the update that marks a policy for deletion, whatever its generation.
type deleting struct{ predicate.Funcs }

func (deleting) Update(e event.UpdateEvent) bool {
	return e.ObjectNew.GetDeletionTimestamp() != nil && e.ObjectOld.GetDeletionTimestamp() == nil
}
