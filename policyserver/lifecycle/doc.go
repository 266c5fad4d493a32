// Package lifecycle drives a policy server from PolicyRevisions instead of a file (Kubewarden's
// policy lifecycle RFC). One replica at a time, the leader (Lease regent-policy-server-<name>),
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
package lifecycle
