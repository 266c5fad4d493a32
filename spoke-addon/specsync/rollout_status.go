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
// OCM. The hub owns that field; status sync reports only compliance back, so the two never
// write the same field.
func (r *Reconciler) copyRolloutStatus(ctx context.Context, local, hub *policyv1.Policy) error {
	if local.Status.RolloutStatus == hub.Status.RolloutStatus {
		return nil
	}
	var value any // null removes it: an empty rollout status is not a valid value
	if hub.Status.RolloutStatus != "" {
		value = hub.Status.RolloutStatus
	}
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"rolloutStatus": value}})
	if err != nil {
		return err
	}
	if err := r.Local.Status().Patch(ctx, local, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return fmt.Errorf("copy rollout status to %s/%s: %w", local.Namespace, local.Name, err)
	}
	writes.WithLabelValues("status").Inc()
	return nil
}

// acknowledged says whether the hub's propagator vouched for a Policy in the cluster namespace.
// It gives every replica it writes a rollout status (ToApply, Progressing…), in a status write
// after the replica's creation. A Policy without one was not written by the propagator, or not
// yet: it is not copied to the managed cluster. So a "replica" someone planted in the cluster
// namespace is never applied here, not even in the moment before the propagator deletes it as an
// orphan; planting one that passes would take writing its status too.
func acknowledged(hub *policyv1.Policy) bool { return hub.Status.RolloutStatus != "" }
