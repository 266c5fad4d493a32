// Package hub runs Regent's hub: a controller-runtime manager over the hub apiserver with the
// propagator, which replicates root Policies to managed-cluster namespaces and rolls their
// enforcement out progressively. `regent hub` is a thin main over Run; tests start the manager
// in-process with NewManager.
package hub
