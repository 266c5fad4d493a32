package v1

import (
	"strings"

	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
)

// RolloutStatus is the rollout state of one cluster, or on a root policy the aggregate of its
// clusters. The values mirror the states of sdk-go's rollout handler, spelled as strings.
// +kubebuilder:validation:Enum=ToApply;Progressing;Succeeded;Failed;TimeOut
type RolloutStatus string

const (
	// RolloutToApply: the cluster has the policy as inform and waits for its turn to be enforced.
	RolloutToApply RolloutStatus = "ToApply"
	// RolloutProgressing: the cluster has the current version and has not reported on it yet.
	RolloutProgressing RolloutStatus = "Progressing"
	// RolloutSucceeded: Compliant at the current generation.
	RolloutSucceeded RolloutStatus = "Succeeded"
	// RolloutFailed: NonCompliant at the current generation.
	RolloutFailed RolloutStatus = "Failed"
	// RolloutTimeOut: neither within the strategy's progressDeadline.
	RolloutTimeOut RolloutStatus = "TimeOut"
)

// InitialRolloutStatus is the rollout status a replica has while none is written: the hub does
// not spend a second request per replica on the value its creation already implies, so every
// reader takes an absent rollout status as this one. A replica holding a progressive rollout's
// version as inform waits for its turn (ToApply); any other has the version it gets and has not
// reported on it yet (Progressing). A root that only informs yet names a progressive strategy is
// the one case where the hub writes Progressing explicitly.
func InitialRolloutStatus(spec *PolicySpec) RolloutStatus {
	progressive := spec.RolloutStrategy != nil &&
		(spec.RolloutStrategy.Type == clusterv1alpha1.Progressive || spec.RolloutStrategy.Type == clusterv1alpha1.ProgressivePerGroup)
	if progressive && strings.EqualFold(string(spec.RemediationAction), string(Inform)) {
		return RolloutToApply
	}
	return RolloutProgressing
}

// EffectiveRolloutStatus is a replica's rollout status, the initial one when none is written.
func (p *Policy) EffectiveRolloutStatus() RolloutStatus {
	if p.Status.RolloutStatus != "" {
		return p.Status.RolloutStatus
	}
	return InitialRolloutStatus(&p.Spec)
}
