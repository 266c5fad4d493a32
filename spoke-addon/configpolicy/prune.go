package configpolicy

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// pruneFinalizer holds a policy that prunes until the objects it manages are deleted. The name is
// OCM's, so a policy moved between OCM and Regent keeps its meaning.
const pruneFinalizer = "policy.open-cluster-management.io/delete-related-objects"

// prunes reports whether deleting the policy (or dropping an object from it) deletes objects: as
// in OCM only an enforced policy prunes; an inform policy never changed anything to undo.
func prunes(p *policyv1.ConfigurationPolicy) bool {
	if !strings.EqualFold(string(p.Spec.RemediationAction), string(policyv1.Enforce)) {
		return false
	}
	switch p.Spec.PruneObjectBehavior {
	case "DeleteAll", "DeleteIfCreated":
		return true
	}
	return false
}

// syncFinalizer adds the finalizer to a policy that prunes and removes it from one that no longer
// does (switched to inform or to None), so deleting that policy leaves its objects alone.
func (r *Reconciler) syncFinalizer(ctx context.Context, p *policyv1.ConfigurationPolicy) error {
	want := prunes(p)
	if want == controllerutil.ContainsFinalizer(p, pruneFinalizer) {
		return nil
	}
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	if want {
		controllerutil.AddFinalizer(p, pruneFinalizer)
	} else {
		controllerutil.RemoveFinalizer(p, pruneFinalizer)
	}
	if err := r.client.Patch(ctx, p, patch); err != nil {
		return fmt.Errorf("set finalizer %s: %w", pruneFinalizer, err)
	}
	return nil
}

// finalize deletes what the deleted policy's pruneObjectBehavior says, from the related objects
// of its last status, then lets the policy go. The behavior is read as the policy was when
// deleted: a policy switched to inform lost its finalizer and never gets here.
func (r *Reconciler) finalize(ctx context.Context, p *policyv1.ConfigurationPolicy) error {
	if !controllerutil.ContainsFinalizer(p, pruneFinalizer) {
		return nil
	}
	if prunes(p) {
		for _, rel := range p.Status.RelatedObjects {
			if err := r.prune(ctx, p.Spec.PruneObjectBehavior, rel); err != nil {
				return err
			}
		}
	}
	patch := client.MergeFromWithOptions(p.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(p, pruneFinalizer)
	if err := r.client.Patch(ctx, p, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer %s: %w", pruneFinalizer, err)
	}
	return nil
}

// pruneDropped deletes the objects an enforced, pruning policy managed in its last status but no
// longer matches (an object template removed or renamed), as OCM does on a spec change. A
// template that failed this time says nothing about its objects, so then nothing is pruned.
func (r *Reconciler) pruneDropped(ctx context.Context, p *policyv1.ConfigurationPolicy, out policyOutcome) error {
	if !prunes(p) || out.unmapped {
		return nil
	}
	current := map[string]bool{}
	for _, t := range out.templates {
		if len(t.related) == 0 {
			return nil
		}
		for _, rel := range t.related {
			current[relatedKey(rel)] = true
		}
	}
	for _, rel := range p.Status.RelatedObjects {
		if current[relatedKey(rel)] {
			continue
		}
		if err := r.prune(ctx, p.Spec.PruneObjectBehavior, rel); err != nil {
			return err
		}
	}
	return nil
}

func relatedKey(rel policyv1.RelatedObject) string {
	o := rel.Object
	return o.APIVersion + "/" + o.Kind + "/" + o.Metadata.Namespace + "/" + o.Metadata.Name
}

// prune deletes one related object when behavior asks for it: DeleteAll any object the policy
// required to exist, DeleteIfCreated only one the policy created, recognised by its UID so an
// object recreated by someone else since is left alone.
func (r *Reconciler) prune(ctx context.Context, behavior policyv1.PruneObjectBehavior, rel policyv1.RelatedObject) error {
	name := rel.Object.Metadata.Name
	if name == "" || name == "-" || !managedExists(rel.Reason) {
		return nil
	}
	var uid types.UID
	if rel.Properties != nil {
		uid = types.UID(rel.Properties.UID)
	}
	if behavior == "DeleteIfCreated" {
		if rel.Properties == nil || rel.Properties.CreatedByPolicy == nil || !*rel.Properties.CreatedByPolicy || uid == "" {
			return nil
		}
	}
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(rel.Object.APIVersion)
	obj.SetKind(rel.Object.Kind)
	obj.SetNamespace(rel.Object.Metadata.Namespace)
	obj.SetName(name)
	var opts []client.DeleteOption
	if uid != "" {
		opts = append(opts, client.Preconditions{UID: &uid})
	}
	err := r.client.Delete(ctx, obj, opts...)
	if err == nil || apierrors.IsNotFound(err) || (uid != "" && apierrors.IsConflict(err)) {
		// A UID conflict means the object was replaced by someone else: not ours to delete.
		return nil
	}
	return fmt.Errorf("prune %s %s/%s: %w", rel.Object.Kind, rel.Object.Metadata.Namespace, name, err)
}

// managedExists tells, from the reason OCM words, whether a related object is one a musthave or
// mustonlyhave template found or made; mustnothave objects and missing ones have nothing to prune.
func managedExists(reason string) bool {
	switch reason {
	case foundAsSpecified.relatedReason(), foundNotAsSpecified.relatedReason(), created.relatedReason(),
		updated.relatedReason(), recreated.relatedReason(), updateImmutable.relatedReason():
		return true
	}
	return false
}
