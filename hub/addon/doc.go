// Package addon registers Regent with OCM the way every OCM addon is registered: the hub owns the
// ClusterManagementAddOn "regent", and addon-framework's addon manager turns each
// ManagedClusterAddOn into the agent's manifests (delivered by ManifestWork), its hub identity (a
// CSR-signed client certificate) and that identity's RBAC on the hub — only its cluster
// namespace. The agent's Lease (renewed by addon-framework's lease updater in the spoke addon) is
// what OCM's registration agent turns into the ManagedClusterAddOn's Available condition.
package addon
