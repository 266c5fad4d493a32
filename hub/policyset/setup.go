package policyset

import (
	"context"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
	"regent.dev/regent/hub/propagator"
)

// SetupWithManager registers the controller: PolicySets are the primary kind, and a root Policy
// maps to the sets of its namespace that list it. Bindings and decisions are not watched: a change
// there changes the members' status (placement, per-cluster lines), whose event arrives here.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	// A set's members are roots; replicas carry the root-policy label.
	roots := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, replica := o.GetLabels()[propagator.RootPolicyLabel]
		return !replica
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("policy-set").
		For(&policyv1beta1.PolicySet{}).
		Watches(&policyv1.Policy{}, handler.EnqueueRequestsFromMapFunc(r.policyToSets), builder.WithPredicates(roots)).
		// A process may build the hub's manager more than once (tests restart it in-process).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		Complete(r)
}

// policyToSets enqueues the sets that list the policy, including one whose member was just
// deleted or created.
func (r *Reconciler) policyToSets(ctx context.Context, o client.Object) []reconcile.Request {
	list := &policyv1beta1.PolicySetList{}
	if err := r.Reader.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, s := range list.Items {
		for _, p := range s.Spec.Policies {
			if string(p) == o.GetName() {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
				break
			}
		}
	}
	return out
}
