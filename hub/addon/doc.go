// Package addon registers Regent with OCM the way every OCM addon is registered: the hub owns the
// ClusterManagementAddOn "regent", and addon-framework's addon manager turns each
// ManagedClusterAddOn into the agent's manifests (delivered by ManifestWork), its hub identity (a
// CSR-signed client certificate) and that identity's RBAC on the hub — only its cluster
// namespace. The agent's Lease (renewed by addon-framework's lease updater in the spoke addon) is
// what OCM's registration agent turns into the ManagedClusterAddOn's Available condition.
//
// The agent's manifests are what a managed cluster needs to run it: Regent's CRDs (left in place
// when the addon is disabled), its RBAC (agent_rbac.go: a core ClusterRole, namespaced Roles and an
// aggregated ClusterRole for what policies enforce), the Deployment and PolicyServer "default", shaped
// by the cluster's AddOnDeploymentConfig. With leader election the manager runs in one hub replica
// only, under the Lease LeaderElectionID. Who the addon is (name, namespace, hub Role) lives in
// package addonidentity, which the spoke side imports too.
package addon
