package propagator

import (
	"context"
	"fmt"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
)

// Cache indexes: replicas by their root, bindings by their placement.
const (
	rootIndex      = "regent.dev/root-policy"
	placementIndex = "regent.dev/placement"
)

// SetupWithManager registers the indexes and the controller. Roots are the primary kind; replicas,
// bindings, policy sets and placement decisions map to the roots they concern.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, concurrency int) error {
	idx := mgr.GetFieldIndexer()
	if err := r.indexReplicas(ctx, mgr); err != nil {
		return fmt.Errorf("index replicas by root: %w", err)
	}
	if err := idx.IndexField(ctx, &policyv1.PlacementBinding{}, placementIndex, func(o client.Object) []string {
		return []string{o.(*policyv1.PlacementBinding).PlacementRef.Name}
	}); err != nil {
		return fmt.Errorf("index bindings by placement: %w", err)
	}
	if err := idx.IndexField(ctx, &policyv1.Policy{}, policySetDependencyIndex, indexPolicySetDependencies); err != nil {
		return fmt.Errorf("index roots by the policy sets they depend on: %w", err)
	}
	if err := idx.IndexField(ctx, &openreportsv1alpha1.Report{}, summaryIndex, summaryKey); err != nil {
		return fmt.Errorf("index rolled-up reports by replica: %w", err)
	}
	roots := predicate.NewPredicateFuncs(func(o client.Object) bool { return !isReplica(o) })
	replicas := predicate.NewPredicateFuncs(func(o client.Object) bool { return isReplica(o) })
	b := ctrl.NewControllerManagedBy(mgr).
		Named("root-policy").
		For(&policyv1.Policy{}, builder.WithPredicates(roots, r.rootEchoes())).
		WatchesRawSource(source.Kind(r.replicaCache(mgr), client.Object(&policyv1.Policy{}), r.replicaEvents(), replicas)).
		Watches(&policyv1.PlacementBinding{}, handler.EnqueueRequestsFromMapFunc(r.bindingToRoots)).
		Watches(&policyv1beta1.PolicySet{}, handler.EnqueueRequestsFromMapFunc(r.policySetToRoots)).
		Watches(&clusterv1beta1.PlacementDecision{}, handler.EnqueueRequestsFromMapFunc(r.decisionToRoots)).
		Watches(&openreportsv1alpha1.Report{}, handler.EnqueueRequestsFromMapFunc(summaryToRoot), builder.WithPredicates(summaryFailsChanged))
	if servesPlacementRules(mgr) {
		rule := &unstructured.Unstructured{}
		rule.SetGroupVersionKind(placementRuleGVK)
		b = b.Watches(rule, handler.EnqueueRequestsFromMapFunc(r.ruleToRoots))
	}
	c, err := b.
		// A process may build the hub's manager more than once (tests restart it in-process).
		WithOptions(controller.Options{MaxConcurrentReconciles: concurrency, SkipNameValidation: ptr.To(true)}).
		Build(r)
	if err != nil {
		return err
	}
	r.templateWatches = &templateWatches{cache: mgr.GetCache(), controller: c,
		started: map[schema.GroupVersionKind]bool{}, readers: map[schema.GroupVersionKind]map[types.NamespacedName]map[string]bool{}}
	return r.setupKeyRotation(mgr, c)
}

// replicaCache is where the reconciler reads replicas: Replicas, else the manager's cache.
func (r *Reconciler) replicaCache(mgr ctrl.Manager) cache.Cache {
	if r.Replicas != nil {
		return r.Replicas
	}
	return mgr.GetCache()
}

// indexReplicas indexes replicas by their root. On the informer's own indexer when it exposes it:
// replicasOf then reads the cached objects themselves, where a List through the cache would copy
// each of a root's replicas (one per cluster) into a fresh list on every reconcile.
func (r *Reconciler) indexReplicas(ctx context.Context, mgr ctrl.Manager) error {
	byRoot := func(o client.Object) []string {
		if v, ok := o.GetLabels()[RootPolicyLabel]; ok {
			return []string{v}
		}
		return nil
	}
	inf, err := r.replicaCache(mgr).GetInformer(ctx, &policyv1.Policy{})
	if err != nil {
		return err
	}
	// How far the cache got: expectations wait for a lagging cache as long as it moves.
	if _, err := inf.AddEventHandler(r.expect.progress()); err != nil {
		return err
	}
	if withIndexer, ok := inf.(interface{ GetIndexer() toolscache.Indexer }); ok {
		err := inf.AddIndexers(toolscache.Indexers{rootIndex: func(obj any) ([]string, error) {
			if o, ok := obj.(client.Object); ok {
				return byRoot(o), nil
			}
			return nil, nil
		}})
		if err != nil {
			return err
		}
		r.replicaIndex = withIndexer.GetIndexer()
		return nil
	}
	if r.Replicas != nil {
		return fmt.Errorf("the replica cache's informer %T has no indexer", inf)
	}
	return mgr.GetFieldIndexer().IndexField(ctx, &policyv1.Policy{}, rootIndex, byRoot)
}

func replicaToRoot(_ context.Context, o client.Object) []reconcile.Request {
	ns, name, ok := rootOf(o)
	if !ok {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// bindingToRoots enqueues the roots a binding names, directly or through a policy set.
func (r *Reconciler) bindingToRoots(ctx context.Context, o client.Object) []reconcile.Request {
	b := o.(*policyv1.PlacementBinding)
	var out []reconcile.Request
	for _, s := range b.Subjects {
		switch s.Kind {
		case "Policy":
			out = append(out, request(b.Namespace, s.Name))
		case "PolicySet":
			set := &policyv1beta1.PolicySet{}
			if err := r.Reader.Get(ctx, types.NamespacedName{Namespace: b.Namespace, Name: s.Name}, set); err != nil {
				continue
			}
			for _, p := range set.Spec.Policies {
				out = append(out, request(b.Namespace, string(p)))
			}
		}
	}
	return out
}

// policySetToRoots enqueues a set's policies, and the roots that depend on the set (their
// replicas name its members). A policy removed from the set is enqueued by the event's old object:
// controller-runtime calls the map function for both.
func (r *Reconciler) policySetToRoots(ctx context.Context, o client.Object) []reconcile.Request {
	set := o.(*policyv1beta1.PolicySet)
	out := make([]reconcile.Request, 0, len(set.Spec.Policies))
	for _, p := range set.Spec.Policies {
		out = append(out, request(set.Namespace, string(p)))
	}
	return append(out, r.policySetToDependants(ctx, set)...)
}

// decisionToRoots enqueues the roots bound to the decision's placement.
func (r *Reconciler) decisionToRoots(ctx context.Context, o client.Object) []reconcile.Request {
	placement := o.GetLabels()[clusterv1beta1.PlacementLabel]
	if placement == "" {
		return nil
	}
	bindings := &policyv1.PlacementBindingList{}
	if err := r.Reader.List(ctx, bindings, client.InNamespace(o.GetNamespace()), client.MatchingFields{placementIndex: placement}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range bindings.Items {
		if bindings.Items[i].PlacementRef.Kind == placementKind {
			out = append(out, r.bindingToRoots(ctx, &bindings.Items[i])...)
		}
	}
	return out
}

func request(namespace, name string) reconcile.Request {
	return reconcile.Request{NamespacedName: types.NamespacedName{Namespace: namespace, Name: name}}
}
