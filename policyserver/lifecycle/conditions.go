package lifecycle

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// findCondition returns the revision's condition of c's type, if any: the controller's Scheduled
// and the leader's Initialized, one of each.
func findCondition(conds []kubewardenv1.PolicyCondition, c kubewardenv1.PolicyCondition) *kubewardenv1.PolicyCondition {
	for i := range conds {
		if conds[i].Type == c.Type {
			return &conds[i]
		}
	}
	return nil
}

// setCondition puts c in place of the condition of its type, keeping the transition time when
// the status does not change, and reports whether anything changed; every other condition is
// left as it is.
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

// findReplica returns replica n's report, if any.
func findReplica(replicas []kubewardenv1.ReplicaStatus, n int32) *kubewardenv1.ReplicaStatus {
	for i := range replicas {
		if replicas[i].Replica == n {
			return &replicas[i]
		}
	}
	return nil
}

// setReplica puts rs in place of its replica's report, so replicas never overwrite each other,
// keeping the transition time when readiness does not change, and reports whether anything
// changed.
func setReplica(replicas []kubewardenv1.ReplicaStatus, rs kubewardenv1.ReplicaStatus, now metav1.Time) ([]kubewardenv1.ReplicaStatus, bool) {
	old := findReplica(replicas, rs.Replica)
	if old == nil {
		rs.LastTransitionTime = now
		return append(replicas, rs), true
	}
	rs.LastTransitionTime = old.LastTransitionTime
	if old.Ready != rs.Ready || rs.LastTransitionTime.IsZero() {
		rs.LastTransitionTime = now
	}
	if old.Ready == rs.Ready && old.Reason == rs.Reason && old.Message == rs.Message && old.PolicyGeneration == rs.PolicyGeneration {
		return replicas, false
	}
	*old = rs
	return replicas, true
}

// replicaCurrent tells whether the revision already says what rs says (readiness, reason and
// generation; messages may carry details that vary).
func replicaCurrent(replicas []kubewardenv1.ReplicaStatus, rs kubewardenv1.ReplicaStatus) bool {
	old := findReplica(replicas, rs.Replica)
	return old != nil && old.Ready == rs.Ready && old.Reason == rs.Reason && old.PolicyGeneration == rs.PolicyGeneration
}

// dropLegacyReady removes the per-replica Ready conditions revisions carried before replicas
// reported in status.replicas: conditions are unique by type now, and the apiserver refuses a
// status that repeats one. The replicas report again into status.replicas.
func dropLegacyReady(conds []kubewardenv1.PolicyCondition) ([]kubewardenv1.PolicyCondition, bool) {
	kept := conds[:0:0]
	for _, c := range conds {
		if c.Type != kubewardenv1.ConditionReady {
			kept = append(kept, c)
		}
	}
	return kept, len(kept) != len(conds)
}
