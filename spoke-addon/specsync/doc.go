// Package specsync mirrors the replicated Policies of one cluster namespace on the hub into the
// same namespace on the managed cluster, with the rollout status the hub gave each replica, and
// deletes what the hub deleted. A Policy the hub's propagator has not acknowledged with a rollout
// status is not copied: a replica planted in the cluster namespace never reaches the cluster.
// The hub is read through an informer cache, so while the hub is unreachable the managed cluster
// keeps its last policies (and keeps enforcing them), and converges from the relist when the hub
// returns.
package specsync
