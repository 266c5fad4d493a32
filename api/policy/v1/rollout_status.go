package v1

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
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

// RolloutConditionType is the type of the condition the hub writes beside a replica's rollout
// status (and on a root, beside its record). On a replica its observedGeneration is the
// replica's generation the written status describes.
const RolloutConditionType = "Rollout"

// InitialRolloutStatus is the rollout status of a replica carrying spec that has not reported on
// its generation yet, while the hub wrote none for it. A replica holding a progressive rollout's
// version as inform waits for its turn (ToApply); any other has the version it gets and has not
// reported on it yet (Progressing).
func InitialRolloutStatus(spec *PolicySpec) RolloutStatus {
	progressive := spec.RolloutStrategy != nil &&
		(spec.RolloutStrategy.Type == clusterv1alpha1.Progressive || spec.RolloutStrategy.Type == clusterv1alpha1.ProgressivePerGroup)
	if progressive && strings.EqualFold(string(spec.RemediationAction), string(Inform)) {
		return RolloutToApply
	}
	return RolloutProgressing
}

// ImpliedRolloutStatus is the rollout status a replica carrying spec has while the hub wrote none
// for its generation, given report, the compliance the managed cluster reported for that
// generation ("" while none). It is what the hub's rollout decides in every common case, so the
// hub spends no request on it: creating a replica and updating its spec are the only writes of a
// progressive rollout, and a spec update makes whatever status was written before stale by
// itself. A replica waiting for its turn stays ToApply whatever it reports on its inform
// version; otherwise Compliant is Succeeded and NonCompliant Failed. The hub writes the status
// only where its decision differs: a progress deadline passed (TimeOut), a root that only
// informs (any report is a success), a root that informs yet names a progressive strategy.
func ImpliedRolloutStatus(spec *PolicySpec, report ComplianceState) RolloutStatus {
	initial := InitialRolloutStatus(spec)
	if initial == RolloutToApply {
		return initial
	}
	switch report {
	case Compliant:
		return RolloutSucceeded
	case NonCompliant:
		return RolloutFailed
	}
	return initial
}

// WrittenRolloutStatus is the rollout status the hub wrote for the replica's current generation,
// "" when none: never written, or written for an earlier generation (its Rollout condition's
// observedGeneration is older). A status without a generation (written before the hub recorded
// one) counts as current.
func (p *Policy) WrittenRolloutStatus() RolloutStatus {
	if p.Status.RolloutStatus == "" {
		return ""
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, RolloutConditionType); c != nil && c.ObservedGeneration != 0 && c.ObservedGeneration != p.Generation {
		return ""
	}
	return p.Status.RolloutStatus
}

// ReportedCompliance is the replica's compliance when the managed cluster evaluated its current
// generation (the contract with the spoke), "" otherwise.
func (p *Policy) ReportedCompliance() ComplianceState {
	if p.Status.LastEvaluatedGeneration != p.Generation {
		return ""
	}
	return p.Status.ComplianceState
}

// EffectiveRolloutStatus is a replica's rollout status: the one the hub wrote for its current
// generation, else the one its spec and report imply.
func (p *Policy) EffectiveRolloutStatus() RolloutStatus {
	if s := p.WrittenRolloutStatus(); s != "" {
		return s
	}
	return ImpliedRolloutStatus(&p.Spec, p.ReportedCompliance())
}
