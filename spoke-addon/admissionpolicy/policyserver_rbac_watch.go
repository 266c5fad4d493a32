package admissionpolicy

import (
	"context"
	"fmt"
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// labelledClusterCache caches the ClusterRoles and ClusterRoleBindings that carry a policy
// server's label, and no others: the cluster's own RBAC is none of the controller's business.
func labelledClusterCache(mgr ctrl.Manager) (cache.Cache, error) {
	has, err := labels.NewRequirement(kubewardenv1.PolicyServerLabel, selection.Exists, nil)
	if err != nil {
		return nil, err
	}
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultLabelSelector: labels.NewSelector().Add(*has),
	})
	if err != nil {
		return nil, fmt.Errorf("cache of policy servers' cluster roles: %w", err)
	}
	return c, mgr.Add(c)
}

// watchRBACInputs wakes a PolicyServer when what its RBAC is made of changes: its own RBAC
// objects (put back when edited or deleted), the ServiceAccount it runs as, a replica Lease that
// comes or goes, and the contextAwareResources or policy server of a ClusterAdmissionPolicy.
func (r *policyServerReconciler) watchRBACInputs(b *builder.Builder, nsCache, clusterCache cache.Cache, owner handler.EventHandler) *builder.Builder {
	for _, obj := range []client.Object{&rbacv1.Role{}, &rbacv1.RoleBinding{}} {
		b = b.WatchesRawSource(source.Kind[client.Object](nsCache, obj, owner))
	}
	for _, obj := range []client.Object{&rbacv1.ClusterRole{}, &rbacv1.ClusterRoleBinding{}} {
		b = b.WatchesRawSource(source.Kind[client.Object](clusterCache, obj, owner))
	}
	// A user's ServiceAccount is not owned: it is found by name.
	b = b.WatchesRawSource(source.Kind[client.Object](nsCache, &corev1.ServiceAccount{},
		handler.EnqueueRequestsFromMapFunc(r.onServiceAccount), predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}))
	// Renewals change no name; creations and deletions do.
	b = b.WatchesRawSource(source.Kind[client.Object](nsCache, &coordinationv1.Lease{},
		handler.EnqueueRequestsFromMapFunc(onReplicaLease), predicate.Funcs{UpdateFunc: func(event.UpdateEvent) bool { return false }}))
	// An AdmissionPolicy's and a group's rules are read by its server's background scan
	// (backgroundScanRules).
	for _, obj := range []client.Object{&kubewardenv1.AdmissionPolicy{}, &kubewardenv1.AdmissionPolicyGroup{}, &kubewardenv1.ClusterAdmissionPolicyGroup{}} {
		b = b.Watches(obj, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: policyServerOf(o)}}}
		}), builder.WithPredicates(predicate.GenerationChangedPredicate{}))
	}
	return b.Watches(&kubewardenv1.ClusterAdmissionPolicy{}, r.policyServersOfPolicy())
}

func (r *policyServerReconciler) onServiceAccount(ctx context.Context, o client.Object) []reconcile.Request {
	list := &kubewardenv1.PolicyServerList{}
	if err := r.reader.List(ctx, list); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for i := range list.Items {
		if serviceAccountOf(&list.Items[i]) == o.GetName() {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
		}
	}
	return reqs
}

func onReplicaLease(_ context.Context, o client.Object) []reconcile.Request {
	if ps, ok := policyServerOfLease(o.GetName()); ok {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: ps}}}
	}
	return nil
}

// policyServersOfPolicy enqueues, when a ClusterAdmissionPolicy appears, goes, or changes
// generation (its spec: contextAwareResources, policyServer) or serving generation, the
// PolicyServer it names and the one serving it, before and after: a moved policy's reads join
// the new server at once and leave the old one when its webhook stops calling it.
func (r *policyServerReconciler) policyServersOfPolicy() handler.Funcs {
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.enqueuePolicyServers(ctx, q, e.Object)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			o, okOld := e.ObjectOld.(*kubewardenv1.ClusterAdmissionPolicy)
			n, okNew := e.ObjectNew.(*kubewardenv1.ClusterAdmissionPolicy)
			if okOld && okNew && o.Generation == n.Generation && o.Status.ServingGeneration == n.Status.ServingGeneration {
				return
			}
			r.enqueuePolicyServers(ctx, q, e.ObjectOld, e.ObjectNew)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			r.enqueuePolicyServers(ctx, q, e.Object)
		},
	}
}

func (r *policyServerReconciler) enqueuePolicyServers(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], policies ...client.Object) {
	var names []string
	for _, o := range policies {
		p, ok := o.(*kubewardenv1.ClusterAdmissionPolicy)
		if !ok {
			continue
		}
		for _, ps := range []string{policyServerOf(p), r.servingServer(ctx, p)} {
			if ps != "" && !slices.Contains(names, ps) {
				names = append(names, ps)
				q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Name: ps}})
			}
		}
	}
}
