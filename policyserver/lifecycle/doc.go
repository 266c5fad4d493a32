// Package lifecycle drives a policy server from PolicyRevisions instead of a file (Kubewarden's
// policy lifecycle RFC). One replica at a time, the leader (Lease regent-policy-server-<name>),
// pulls each new revision's module, precompiles it into the shared cache under the module digest
// and the policy-server version, validates its settings through the guest, signs every cache
// file and marks the revision Initialized. Pulls run in the background, each within its own
// budget; each preparation is recorded on the revision before it starts, so a module that kills
// its preparer is given up after a bound instead of crash-looping every leader. Every replica verifies those signatures, loads the
// revision beside the generations already served and reports whether it did, as its entry in
// the revision's status.replicas. A
// policy error is always a condition, never a replica exit.
package lifecycle
