package specsync

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// copyRolloutStatus gives the managed cluster's copy the rollout status the hub's propagator set
// on the replica (ToApply while it waits for its turn to enforce, Progressing, Succeeded…), so
// `kubectl get policies` on the managed cluster shows where the cluster is in the rollout, as on
// OCM. A replica without one written for its generation has the status its spec and its report
// imply (policyv1.ImpliedRolloutStatus): the hub does not write that one, and the copy shows it all
// the same. The hub owns that field; status sync reports only
// compliance back, so the two never write the same field.
func (r *Reconciler) copyRolloutStatus(ctx context.Context, local, hub *policyv1.Policy) error {
	want := hub.EffectiveRolloutStatus()
	if local.Status.RolloutStatus == want {
		return nil
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"rolloutStatus": want}})
	if err != nil {
		return err
	}
	if err := r.Local.Status().Patch(ctx, local, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("copy rollout status to %s/%s: %w", local.Namespace, local.Name, err)
	}
	writes.WithLabelValues("status").Inc()
	return nil
}

// acknowledged says whether a Policy in the cluster namespace is the hub propagator's replica. The
// propagator's only write for a new replica is its creation (an absent rollout status means the
// initial one), so what vouches for it is what that creation carries: the replica labels naming
// this very object (root label equal to its name, cluster labels equal to its namespace), or a
// rollout status the propagator wrote. Any other Policy there, such as one a person put in the
// cluster namespace by hand, is not copied to the managed cluster.
func acknowledged(hub *policyv1.Policy) bool {
	if hub.Status.RolloutStatus != "" {
		return true
	}
	l := hub.Labels
	return l[rootPolicyLabel] == hub.Name && l[clusterNameLabel] == hub.Namespace && l[clusterNamespaceLabel] == hub.Namespace
}

// The propagator's replica labels (OCM's).
const (
	rootPolicyLabel       = "policy.open-cluster-management.io/root-policy"
	clusterNameLabel      = "policy.open-cluster-management.io/cluster-name"
	clusterNamespaceLabel = "policy.open-cluster-management.io/cluster-namespace"
)
