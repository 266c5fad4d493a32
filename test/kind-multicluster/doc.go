// Package e2e is the end-to-end suite: a hub and several managed clusters with Regent's real
// processes — `regent hub` and one `regent spoke-addon` per cluster, built from cmd/regent — and
// OCM's placement controller making the decisions. It runs on a local fleet (real apiservers on
// this machine) by default, since CI has no container engine.
//
// With REGENT_E2E_TARGET=kind (`make e2e-kind`) the same tests run on kind clusters instead: a
// hub and one kind cluster per managed cluster, OCM installed and joined with clusteradm, Regent's
// image (`make image`) loaded into every node and installed from deploy/ with the addon enabled
// per cluster. Where no Docker engine answers, that run fails before any test with the reason; it
// never passes silently. Tests that drive local processes by PID say so and skip on kind.
// REGENT_E2E_KEEP=1 keeps the kind clusters for inspection.
package e2e
