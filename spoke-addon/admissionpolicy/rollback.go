package admissionpolicy

import (
	"context"
	"fmt"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// rollbackTarget finds the kept revision the annotation names; the condition says why there is
// none, naming the generations that are kept.
func rollbackTarget(value string, revs []revisionState) (*revisionState, metav1.Condition) {
	cond := metav1.Condition{Type: conditionRollback, Status: metav1.ConditionFalse}
	gen, err := strconv.ParseInt(value, 10, 64)
	if err != nil {
		cond.Reason = "InvalidGeneration"
		cond.Message = fmt.Sprintf("annotation %s=%q is not a generation number; kept generations: %s",
			kubewardenv1.RollbackAnnotation, value, keptGenerations(revs))
		return nil, cond
	}
	if r := findRevision(revs, gen); r != nil {
		return r, metav1.Condition{}
	}
	cond.Reason = "UnknownGeneration"
	cond.Message = fmt.Sprintf("generation %d is not kept; kept generations: %s", gen, keptGenerations(revs))
	return nil, cond
}

// rollback copies the named revision's spec back to the policy and removes the annotation, so the
// restored spec becomes a new generation and goes through the lifecycle (done). When the
// generation is not kept, the annotation stays and the returned condition says why.
func (r *policyReconciler) rollback(ctx context.Context, obj client.Object, value string, revs []kubewardenv1.PolicyRevision) (bool, metav1.Condition, error) {
	states := make([]revisionState, len(revs))
	for i := range revs {
		states[i] = stateOf(&revs[i])
	}
	target, cond := rollbackTarget(value, states)
	if root, ok := hubManaged(obj); ok {
		target, cond = nil, metav1.Condition{Type: conditionRollback, Status: metav1.ConditionFalse, Reason: "ManagedByHub",
			Message: fmt.Sprintf("not rolled back to generation %s: this policy is delivered by the hub's policy %s and follows its spec, "+
				"so a rollback here would be undone at the next sync; roll back on the hub (restore the root policy's earlier template), "+
				"then remove the %s annotation", value, root, kubewardenv1.RollbackAnnotation)}
	}
	if target == nil {
		// Every reconcile comes here while the annotation stays; say it once per new answer.
		if prev := findCondition(statusOf(obj).Conditions, conditionRollback); prev == nil || prev.Message != cond.Message {
			outcome, reason := "unknown_generation", "RollbackFailed"
			if cond.Reason == "ManagedByHub" {
				outcome, reason = "managed_by_hub", "RollbackRefused"
			}
			rollbacks.WithLabelValues(outcome).Inc()
			r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, reason, "Rollback", "%s", cond.Message)
		}
		cond.LastTransitionTime = metav1.NewTime(r.clock.Now().Truncate(time.Second))
		cond.ObservedGeneration = obj.GetGeneration()
		return false, cond, nil
	}
	var data []byte
	for i := range revs {
		if revs[i].Name == target.Name {
			data = revs[i].Spec.Data.Raw
		}
	}
	// A copy: when the apiserver refuses the restored spec, the policy stays as it is.
	updated := obj.DeepCopyObject().(client.Object)
	if err := restoreSpec(updated, data); err != nil {
		return false, cond, fmt.Errorf("decode revision %s: %w", target.Name, err)
	}
	annotations := updated.GetAnnotations()
	delete(annotations, kubewardenv1.RollbackAnnotation)
	updated.SetAnnotations(annotations)
	if err := r.client.Update(ctx, updated); apierrors.IsInvalid(err) {
		// Kubewarden's rules hold for rollbacks too: a generation served by another
		// PolicyServer, or in monitor mode under a protect policy, cannot be restored.
		cond = metav1.Condition{Type: conditionRollback, Status: metav1.ConditionFalse, Reason: "RollbackRefused",
			Message: fmt.Sprintf("generation %d cannot be restored: %v", target.Generation, err)}
		if prev := findCondition(statusOf(obj).Conditions, conditionRollback); prev == nil || prev.Message != cond.Message {
			rollbacks.WithLabelValues("refused").Inc()
			r.recorder.Eventf(obj, nil, corev1.EventTypeWarning, "RollbackFailed", "Rollback", "%s", cond.Message)
		}
		cond.LastTransitionTime = metav1.NewTime(r.clock.Now().Truncate(time.Second))
		cond.ObservedGeneration = obj.GetGeneration()
		return false, cond, nil
	} else if err != nil {
		return false, cond, fmt.Errorf("restore generation %d: %w", target.Generation, err)
	}
	rollbacks.WithLabelValues("restored").Inc()
	r.recorder.Eventf(obj, nil, corev1.EventTypeNormal, "RolledBack", "Rollback",
		"restored the spec of generation %d; it is served as generation %d once every replica is Ready",
		target.Generation, updated.GetGeneration())
	return true, cond, nil
}

// templatePolicyLabel is what the spoke addon's template sync labels every object a hub policy
// delivers with (OCM's label): the name of the replicated policy in the cluster namespace.
const templatePolicyLabel = "policy.open-cluster-management.io/policy"

// hubManaged says whether a hub policy delivers obj, naming it as <cluster namespace>/<policy>.
// Its spec is the hub's: template sync restores it whenever it differs, so a spoke-side rollback
// would only bounce between two generations. The hub's spec wins, and the Rollback condition
// says where to roll back instead.
func hubManaged(obj client.Object) (string, bool) {
	policy, ok := obj.GetLabels()[templatePolicyLabel]
	if !ok || policy == "" {
		return "", false
	}
	return obj.GetLabels()["policy.open-cluster-management.io/cluster-namespace"] + "/" + policy, true
}
