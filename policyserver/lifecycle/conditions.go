package lifecycle

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// sameSlot tells whether two conditions occupy the same place in a revision's status: one
// condition per type and replica (none for the leader's), so replicas never overwrite each other.
func sameSlot(a, b kubewardenv1.PolicyCondition) bool {
	if a.Type != b.Type || (a.Replica == nil) != (b.Replica == nil) {
		return false
	}
	return a.Replica == nil || *a.Replica == *b.Replica
}

// findCondition returns the condition in c's slot, if any.
func findCondition(conds []kubewardenv1.PolicyCondition, c kubewardenv1.PolicyCondition) *kubewardenv1.PolicyCondition {
	for i := range conds {
		if sameSlot(conds[i], c) {
			return &conds[i]
		}
	}
	return nil
}

// setCondition puts c into its slot, keeping the slot's transition time when the status does
// not change, and reports whether anything changed; every other condition is left as it is.
func setCondition(conds []kubewardenv1.PolicyCondition, c kubewardenv1.PolicyCondition, now metav1.Time) ([]kubewardenv1.PolicyCondition, bool) {
	old := findCondition(conds, c)
	if old == nil {
		c.LastTransitionTime = now
		return append(conds, c), true
	}
	c.LastTransitionTime = old.LastTransitionTime
	if old.Status != c.Status || c.LastTransitionTime.IsZero() {
		c.LastTransitionTime = now
	}
	if old.Status == c.Status && old.Reason == c.Reason && old.Message == c.Message && old.PolicyGeneration == c.PolicyGeneration {
		return conds, false
	}
	*old = c
	return conds, true
}

// conditionCurrent tells whether the revision already says what c says (status, reason and
// generation; messages may carry details that vary).
func conditionCurrent(conds []kubewardenv1.PolicyCondition, c kubewardenv1.PolicyCondition) bool {
	old := findCondition(conds, c)
	return old != nil && old.Status == c.Status && old.Reason == c.Reason && old.PolicyGeneration == c.PolicyGeneration
}
