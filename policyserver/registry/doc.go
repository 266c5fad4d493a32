// Package registry holds the policies a policy server serves, keyed by name and generation, and
// lets them be added, replaced and removed while requests are in flight.
//
// Readers take a reference to a policy from an immutable snapshot (an atomic pointer load, no
// lock shared between requests); writers build a new snapshot and swap it in. A policy that
// leaves the snapshot is closed only once the last request holding it has finished, so a
// request sees either the old policy or the new one, never a closed one.
package registry
