// Package policyset computes the status of OCM PolicySets on the hub from their member root
// policies, as OCM's governance-policy-propagator does.
//
// A set's compliance is that of its existing, enabled members on the clusters the set's own
// bindings select: NonCompliant when any member is, else Pending when any member waits for its
// dependencies, else Compliant; empty while a member has reported nothing yet. The placement column
// lists the bindings that select the set (read from the members' own placement status, where the
// propagator records the set a binding came through), and statusMessage names the members that are
// pending, disabled, silent or missing, in OCM's words. A missing member is also a Warning Event
// (PolicyNotFound) on the set. Everything the status depends on reaches it through the member roots
// (their status changes when bindings or decisions do), so the controller watches sets and roots
// only, and writes the status only when it changed.
package policyset
