package configpolicy

import (
	"context"
	"fmt"

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
	"regent.dev/regent/eventnote"
)

// controllerName names the controller, its event reporter and its field manager.
const controllerName = "configuration-policy-controller"

// Options tune the controller; the zero value is production's.
type Options struct {
	// Clock stamps lastEvaluated and condition times; the real clock when nil.
	Clock clock.PassiveClock
	// MaxConcurrentReconciles is how many policies are evaluated at once; 4 when zero.
	MaxConcurrentReconciles int
	// MaxNamespacesPerKind is how many namespaces a kind the policies name is watched in one by
	// one before it is watched cluster-wide; DefaultMaxNamespacesPerKind when zero.
	MaxNamespacesPerKind int

	// observe, for tests, is called after each successful evaluation.
	observe func(policy types.NamespacedName, statusWritten bool)
	// caches, for tests, receives the controller's object caches.
	caches func(*objectCaches)
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
	// The objects policies name are held apart from the manager's cache, scoped to the
	// namespaces the policies name; managed fields dropped as in the addon's cache.
	caches := newObjectCaches(mgr.GetConfig(), cache.Options{
		HTTPClient:       mgr.GetHTTPClient(),
		Scheme:           mgr.GetScheme(),
		Mapper:           mgr.GetRESTMapper(),
		DefaultTransform: cache.TransformStripManagedFields(),
	}, opts.MaxNamespacesPerKind)
	if err := mgr.Add(caches); err != nil {
		return err
	}
	if opts.caches != nil {
		opts.caches(caches)
	}
	r := &Reconciler{
		client:   mgr.GetClient(),
		index:    newWatchIndex(),
		caches:   caches,
		recorder: eventnote.Capped(mgr.GetEventRecorder(controllerName)),
		clock:    opts.Clock,
		observe:  opts.observe,
	}
	r.eval = &evaluator{
		reader:          caches,
		namespaceReader: mgr.GetCache(),
		writer:          client.WithFieldOwner(mgr.GetClient(), controllerName),
		mapper:          mgr.GetRESTMapper(),
		watch: func(ctx context.Context, policy types.NamespacedName, ref watchRef) error {
			r.index.add(policy, ref)
			return caches.ensure(ctx, policy, ref)
		},
	}
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
	caches.watch = func(from cache.Cache, gvk schema.GroupVersionKind) error {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(gvk)
		lookingAt := func(_ context.Context, o client.Object) []reconcile.Request {
			return requests(r.index.lookingAt(gvk, o.GetName()))
		}
		return c.Watch(source.Kind[client.Object](from, obj, handler.EnqueueRequestsFromMapFunc(lookingAt)))
	}
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

// deleting passes the update that marks a policy for deletion, whatever its generation.
type deleting struct{ predicate.Funcs }

func (deleting) Update(e event.UpdateEvent) bool {
	return e.ObjectNew.GetDeletionTimestamp() != nil && e.ObjectOld.GetDeletionTimestamp() == nil
}
