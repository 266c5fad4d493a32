// Package spokeaddon is what `regent spoke-addon` runs on every managed cluster: spec sync (hub
// replicas → the cluster), template sync with dependency gating, the ConfigurationPolicy
// controller, status sync (the cluster → hub replicas), and the OCM addon lease that tells the
// hub the agent is alive. It talks to its own cluster with full rights and to the hub only
// within its cluster namespace.
package spokeaddon
