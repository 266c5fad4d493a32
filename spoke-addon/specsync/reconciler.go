package specsync

import (
	"context"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// Reconciler copies one hub Policy to the managed cluster.
type Reconciler struct {
	// Hub reads the replicated policies (cache scoped to the cluster namespace).
	Hub client.Reader
	// Local writes the managed cluster's copies.
	Local    client.Client
	Recorder record.EventRecorder
}

// Reconcile makes the managed cluster's copy match the hub's, or removes it.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	hub := &policyv1.Policy{}
	hubErr := r.Hub.Get(ctx, req.NamespacedName, hub)
	if hubErr != nil && !apierrors.IsNotFound(hubErr) {
		return reconcile.Result{}, fmt.Errorf("read hub policy %s: %w", req, hubErr)
	}
	local := &policyv1.Policy{}
	localErr := r.Local.Get(ctx, req.NamespacedName, local)
	if localErr != nil && !apierrors.IsNotFound(localErr) {
		return reconcile.Result{}, fmt.Errorf("read local policy %s: %w", req, localErr)
	}
	switch {
	case apierrors.IsNotFound(hubErr) && apierrors.IsNotFound(localErr):
		return reconcile.Result{}, nil
	case apierrors.IsNotFound(hubErr):
		if err := r.Local.Delete(ctx, local); err != nil && !apierrors.IsNotFound(err) {
			return reconcile.Result{}, fmt.Errorf("delete %s removed on the hub: %w", req, err)
		}
		writes.WithLabelValues("delete").Inc()
		return reconcile.Result{}, nil
	}
	want := desired(hub)
	if apierrors.IsNotFound(localErr) {
		if !acknowledged(hub) {
			// Not (yet) the hub's: its status write, or the propagator's deletion of a planted
			// one, brings it back here.
			return reconcile.Result{}, nil
		}
		if err := r.Local.Create(ctx, want); err != nil {
			return reconcile.Result{}, fmt.Errorf("create %s: %w", req, err)
		}
		writes.WithLabelValues("create").Inc()
		return reconcile.Result{}, r.copyRolloutStatus(ctx, want, hub)
	}
	if inSync(local, want) {
		return reconcile.Result{}, r.copyRolloutStatus(ctx, local, hub)
	}
	local.Spec = want.Spec
	if local.Labels == nil {
		local.Labels = map[string]string{}
	}
	if local.Annotations == nil {
		local.Annotations = map[string]string{}
	}
	maps.Copy(local.Labels, want.Labels)
	maps.Copy(local.Annotations, want.Annotations)
	if err := r.Local.Update(ctx, local); err != nil {
		return reconcile.Result{}, fmt.Errorf("update %s: %w", req, err)
	}
	writes.WithLabelValues("update").Inc()
	return reconcile.Result{}, r.copyRolloutStatus(ctx, local, hub)
}

// SetupWithManager watches the hub's policies (their rollout status included) and the managed
// cluster's copies, so an edit on either side brings the copy back to the hub's version.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, hub cluster.Cluster, clusterName string) error {
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == clusterName })
	return ctrl.NewControllerManagedBy(mgr).
		Named("specsync").
		WatchesRawSource(source.Kind(hub.GetCache(), &policyv1.Policy{},
			&handler.TypedEnqueueRequestForObject[*policyv1.Policy]{})).
		Watches(&policyv1.Policy{}, &handler.EnqueueRequestForObject{},
			builder.WithPredicates(inNamespace, predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Complete(r)
}
