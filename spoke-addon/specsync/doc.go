// Package specsync mirrors the replicated Policies of one cluster namespace on the hub into the
// same namespace on the managed cluster, with the rollout status the hub gave each replica, and
// deletes what the hub deleted. A replica without a rollout status has the initial one its spec
// implies (the hub writes only the creation). A Policy the propagator has not acknowledged, by
// replica labels naming it or a rollout status, is not copied to the managed cluster.
// The hub is read through an informer cache, so while the hub is unreachable the managed cluster
// keeps its last policies (and keeps enforcing them), and converges from the relist when the hub
// returns.
package specsync
