// Package propagator replicates root Policies to the namespaces of the managed clusters their
// placements select, and drives the progressive rollout of their enforcement.
//
// One reconciler per root Policy reads everything from the manager's cache (bindings, policy sets,
// placement decisions through sdk-go's tracker) and the replicas from a cache of their own, as
// CachedReplica records (replica_record.go), lets package rollout decide each
// cluster's rollout status, and then writes: the root's status first — it is the rollout's record,
// so a hub killed at any moment resumes from it; a merge patch, and a reconcile whose cached root
// predates the hub's own last patch waits for the cache (root_versions.go) — then the replicas
// (created, updated, put back, deleted) and their rollout status, except where the replica
// implies it: a replica without a rollout status written for its generation has the one its spec
// and its report on that generation imply (policyv1.ImpliedRolloutStatus: ToApply, Progressing,
// Succeeded, Failed), so a progressive rollout's only writes are a replica's creation and its spec
// updates, and a spec update makes any status written before stale by itself; only a status the
// replica does not imply (TimeOut, a root that only informs) is written, with the generation it
// describes, and removed once it no longer holds. A create the cache has not seen yet and the apiserver
// answers "already exists" is no failure. Nothing is written when nothing changed. A replica write the
// apiserver refuses fails only its cluster: it is named on the root (condition ReplicasWritten)
// and retried, while the other clusters move on and the rollout's own recheck time is kept. A root
// whose replicas would exceed the hub's byte cap is not propagated (Propagated=False,
// ReplicatedSizeOverLimit) and its existing replicas are left alone. Replicas are tied to
// their root by OCM's labels, not owner references, because owners cannot live in another
// namespace; a replica whose root is gone is deleted when the root's key is reconciled. As on
// OCM, a cluster namespace holds replicas only: a root created in one, or a replica-looking
// Policy there that no root accounts for, is deleted with an Event (orphans.go). Clusters are
// chosen by Placements and, still, by OCM's deprecated PlacementRules (placement_rules.go). A
// dependency on a PolicySet reaches the replicas as dependencies on the set's members, as OCM
// writes it, and follows the set's membership (policyset_dependencies.go); the set's own status
// is package policyset's.
package propagator
