// Package lifecycle drives a policy server from PolicyRevisions instead of a file (Kubewarden's
// policy lifecycle RFC). One process at a time, the leader (Lease regent-policy-server-<name>),
// pulls each new revision's module, precompiles it into its signed cache under the module digest
// and the policy-server version, validates its settings through the guest, signs every cache
// file and marks the revision Initialized. The cache is a folder every replica shares
// (--shared-cache, ReadWriteMany), or each replica's own (--signed-cache): a replica then fetches
// the entries it lacks from the leader, found through the Leases, and verifies them in memory
// before keeping them (transfer.go); a new leader signs again what it lacks (republish.go). Pulls run in the background, each within its own
// budget; each preparation is recorded on the revision before it starts, so a module that kills
// its preparer is given up after a bound instead of crash-looping every leader. Every replica verifies those signatures, loads the
// revision beside the generations already served and reports whether it did, as its entry in
// the revision's status.replicas. A
// policy error is always a condition, never a replica exit.
//
// A process plays a Role. RoleAll (local processes) serves, reports Ready and campaigns. In a
// cluster only the leader's ServiceAccount may read the signing key and a pod has one identity, so
// the replicas play RoleReplica (they never campaign) and a workload of its own plays RoleLeader:
// it leads, serves the signed entries and runs the background scan, serves no admission and is no
// replica. Replicas find it as they find a RoleAll leader: the leader Lease names the holder, and
// LeaderAddressLeaseName, renewed by that holder while it leads, carries its address. A replica's
// report says when its entry was fetched from the leader and verified.
package lifecycle
