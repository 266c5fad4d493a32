package addon

import (
	"context"

	"k8s.io/utils/ptr"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"regent.dev/regent/addonidentity"
)

// ownerReconciler makes each ManagedClusterAddOn "regent" owned by the ClusterManagementAddOn, as
// OCM's cluster-manager does for the addons it manages. addon-framework registers an addon only
// once it is owned, and a hub running Regent without OCM's cluster-manager still needs that; where
// cluster-manager runs too, both set the same reference.
type ownerReconciler struct{ client client.Client }

func (r *ownerReconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	mca := &addonv1alpha1.ManagedClusterAddOn{}
	if err := r.client.Get(ctx, req.NamespacedName, mca); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	cma := &addonv1alpha1.ClusterManagementAddOn{}
	if err := r.client.Get(ctx, client.ObjectKey{Name: addonidentity.AddonName}, cma); err != nil {
		return reconcile.Result{}, err
	}
	for _, ref := range mca.OwnerReferences {
		if ref.UID == cma.UID {
			return reconcile.Result{}, nil
		}
	}
	if err := controllerutil.SetOwnerReference(cma, mca, r.client.Scheme()); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.client.Update(ctx, mca)
}

func (r *ownerReconciler) setup(mgr ctrl.Manager) error {
	named := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == addonidentity.AddonName })
	return ctrl.NewControllerManagedBy(mgr).Named("regent-addon-owner").
		For(&addonv1alpha1.ManagedClusterAddOn{}, builder.WithPredicates(named)).
		// A process may run the addon manager more than once (tests run it in-process, one after
		// the other), as it may the hub's manager.
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		Complete(r)
}
