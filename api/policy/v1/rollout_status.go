package v1

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
