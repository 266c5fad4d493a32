// Package e2e is the end-to-end suite: a hub and several managed clusters with Regent's real
// processes — `regent hub` and one `regent spoke-addon` per cluster, built from cmd/regent — and
// OCM's placement controller making the decisions. It runs on a local fleet (real apiservers on
// this machine), since CI has no container engine for kind.
package e2e
