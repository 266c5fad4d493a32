package statussync

import (
	"context"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
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

// Reconciler copies a local policy's status to its hub replica.
type Reconciler struct {
	Local client.Reader
	// HubReader reads hub replicas from the cache; HubWriter patches their status.
	HubReader client.Reader
	HubWriter client.Client
}

// reported is the part of the status the managed cluster owns; the hub owns the rest (rollout
// status, placements).
type reported struct {
	ComplianceState         policyv1.ComplianceState       `json:"compliant"`
	LastEvaluatedGeneration int64                          `json:"lastEvaluatedGeneration"`
	Details                 []*policyv1.DetailsPerTemplate `json:"details"`
}

func reportOf(s *policyv1.PolicyStatus) reported {
	return reported{ComplianceState: s.ComplianceState, LastEvaluatedGeneration: s.LastEvaluatedGeneration, Details: s.Details}
}

// mergePatch spells empty fields as null, which a JSON merge patch reads as "remove": an empty
// compliance is not a valid value, it is the absence of one.
func mergePatch(r reported) map[string]any {
	out := map[string]any{"compliant": nil, "lastEvaluatedGeneration": nil, "details": nil}
	if r.ComplianceState != "" {
		out["compliant"] = r.ComplianceState
	}
	if r.LastEvaluatedGeneration != 0 {
		out["lastEvaluatedGeneration"] = r.LastEvaluatedGeneration
	}
	if len(r.Details) > 0 {
		out["details"] = r.Details
	}
	return out
}

// Reconcile patches the hub replica's status when the managed cluster's view differs.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	local := &policyv1.Policy{}
	if err := r.Local.Get(ctx, req.NamespacedName, local); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	hub := &policyv1.Policy{}
	if err := r.HubReader.Get(ctx, req.NamespacedName, hub); err != nil {
		// A replica the hub removed is deleted here by spec sync; nothing to report.
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	want := reportOf(&local.Status)
	if equality.Semantic.DeepEqual(reportOf(&hub.Status), want) {
		return reconcile.Result{}, nil
	}
	patch, err := json.Marshal(map[string]any{"status": mergePatch(want)})
	if err != nil {
		return reconcile.Result{}, err
	}
	err = r.HubWriter.Status().Patch(ctx, hub, client.RawPatch(types.MergePatchType, patch))
	if apierrors.IsNotFound(err) {
		return reconcile.Result{}, nil
	}
	if err != nil {
		return reconcile.Result{}, fmt.Errorf("report status of %s to the hub: %w", req, err)
	}
	writes.Inc()
	return reconcile.Result{}, nil
}

// SetupWithManager reacts to local status changes and to the hub replica changing (a new
// generation, or a status someone overwrote).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, hub cluster.Cluster, clusterName string) error {
	inNamespace := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetNamespace() == clusterName })
	return ctrl.NewControllerManagedBy(mgr).
		Named("statussync").
		For(&policyv1.Policy{}, builder.WithPredicates(inNamespace)).
		WatchesRawSource(source.Kind(hub.GetCache(), &policyv1.Policy{},
			&handler.TypedEnqueueRequestForObject[*policyv1.Policy]{})).
		Complete(r)
}
