package propagator

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// A cluster namespace on the hub holds replicas only, and only the propagator writes them: the
// managed cluster's addon syncs whatever Policy it finds there and enforces it. So, as OCM's
// propagator does, a Policy in a cluster namespace that no root accounts for is deleted — a root
// created there, a "replica" whose root does not exist, one whose name is not its root's — and
// an Event says why. A cluster namespace is one named after a ManagedCluster.

// inClusterNamespace says whether namespace belongs to a managed cluster. Only the name matters:
// ManagedClusters are cached as metadata, not with their status (resources, claims).
func (r *Reconciler) inClusterNamespace(ctx context.Context, namespace string) (bool, error) {
	mc := &metav1.PartialObjectMetadata{}
	mc.SetGroupVersionKind(clusterv1.SchemeGroupVersion.WithKind("ManagedCluster"))
	err := r.Reader.Get(ctx, types.NamespacedName{Name: namespace}, mc)
	switch {
	case err == nil:
		return true, nil
	case apierrors.IsNotFound(err):
		return false, nil
	}
	return false, fmt.Errorf("is %s a cluster namespace: %w", namespace, err)
}

// refuseRootInClusterNamespace deletes a root created in a cluster namespace; it reports whether
// root was one. Such a root is never propagated.
func (r *Reconciler) refuseRootInClusterNamespace(ctx context.Context, root *policyv1.Policy) (bool, error) {
	in, err := r.inClusterNamespace(ctx, root.Namespace)
	if err != nil || !in {
		return false, err
	}
	r.Recorder.Eventf(root, nil, "Warning", "RootPolicyInClusterNamespace", "Delete",
		"namespace %s belongs to managed cluster %s and holds only replicated policies: the policy is deleted and not propagated; create it in another namespace", root.Namespace, root.Namespace)
	return true, r.deleteReplica(ctx, root)
}

// deleteOrphan deletes a Policy that carries the root-policy label of a root it is not a replica
// of, when it sits in a cluster namespace. Elsewhere it is left alone, as OCM leaves it: a hub
// that is itself managed by another hub holds replicas of roots that live there.
func (r *Reconciler) deleteOrphan(ctx context.Context, rep *policyv1.Policy, why string) error {
	in, err := r.inClusterNamespace(ctx, rep.Namespace)
	if err != nil || !in {
		return err
	}
	r.Recorder.Eventf(rep, nil, "Warning", "OrphanedReplicaDeleted", "Delete",
		"policy %s/%s looks replicated (label %s=%s) but %s: deleted so that managed cluster %s does not apply it",
		rep.Namespace, rep.Name, RootPolicyLabel, rep.Labels[RootPolicyLabel], why, rep.Namespace)
	return r.deleteReplica(ctx, rep)
}
