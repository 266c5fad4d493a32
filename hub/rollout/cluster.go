package rollout

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// Cluster is one selected cluster's rollout state: what the root's status recorded, plus what its
// replica shows now.
type Cluster struct {
	// Status and LastTransitionTime are the root's record for the current rollout; empty for a
	// cluster the rollout has not seen (new, or the root's spec changed).
	Status             policyv1.RolloutStatus
	LastTransitionTime *metav1.Time

	// Active says the replica already carries the spec the cluster gets once its turn came (the
	// root's remediation). In a progressive rollout that is evidence the cluster was chosen, even
	// when the root's record of it was lost or is stale.
	Active bool
	// Reported is the compliance the managed cluster reported for the replica's current generation
	// while Active; empty when it has not reported on it yet.
	Reported policyv1.ComplianceState
}

// Mode is how the root's enforcement reaches its clusters.
type Mode int

const (
	// AsIs: every cluster gets the root as it is at once (strategy All, or the root only informs).
	AsIs Mode = iota
	// InformAsIs is AsIs for a root that only informs: any evaluation of the current generation is
	// a success, since informing cannot fail to apply.
	InformAsIs
	// Progressive: clusters carry the root as inform (ToApply) until the handler gives them their
	// turn to enforce.
	Progressive
)

// observe folds the replica's report into the recorded status: it says what the cluster's status
// is before the handler decides anything. It returns the recorded status when nothing changed.
func observe(mode Mode, c Cluster) policyv1.RolloutStatus {
	status := c.Status
	if status == "" {
		status = policyv1.RolloutToApply
	}
	if status == policyv1.RolloutToApply {
		if mode == Progressive && !c.Active {
			return policyv1.RolloutToApply
		}
		status = policyv1.RolloutProgressing
	}
	switch c.Reported {
	case policyv1.Compliant:
		return policyv1.RolloutSucceeded
	case policyv1.NonCompliant:
		if mode == InformAsIs {
			return policyv1.RolloutSucceeded
		}
		if status == policyv1.RolloutTimeOut {
			// The deadline passed before the cluster answered; a late failure is still a failure
			// and flipping back to Failed would only restart the handler's deadline clock.
			return policyv1.RolloutTimeOut
		}
		return policyv1.RolloutFailed
	case policyv1.Pending:
		if mode == InformAsIs {
			return policyv1.RolloutSucceeded
		}
	}
	// No result for the current generation: a result recorded earlier was for an older one.
	if status == policyv1.RolloutSucceeded || status == policyv1.RolloutFailed {
		return policyv1.RolloutProgressing
	}
	return status
}
