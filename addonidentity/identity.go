// Package addonidentity is who Regent's OCM addon is, the one thing the hub's addon manager
// (hub/addon) and the agent on a managed cluster (spoke-addon) must agree on: the addon name,
// the install namespace, the hub kubeconfig Secret OCM's registration agent writes, and the
// hub Role the agent's identity is granted in its cluster namespace. Both sides import it; neither
// imports the other.
package addonidentity

import "fmt"

// AddonName is the OCM addon name: the ClusterManagementAddOn on the hub, each cluster's
// ManagedClusterAddOn, and the agent's Lease.
const AddonName = "regent"

// DefaultInstallNamespace is where OCM installs addon agents on a managed cluster unless the
// ManagedClusterAddOn or its AddOnDeploymentConfig names another.
const DefaultInstallNamespace = "open-cluster-management-agent-addon"

// HubKubeconfigSecret is the Secret in the install namespace into which OCM's registration agent
// writes the agent's hub kubeconfig (its CSR signed by the hub): "<addon name>-hub-kubeconfig".
const HubKubeconfigSecret = AddonName + "-hub-kubeconfig"

// AgentName is the user name of the agent's hub client certificate.
const AgentName = "regent-agent"

// HubGroup is the group OCM puts in every hub certificate it issues for this addon on a cluster.
func HubGroup(clusterName string) string {
	return fmt.Sprintf("system:open-cluster-management:cluster:%s:addon:%s", clusterName, AddonName)
}

// PolicyServerNamespace is where the agent keeps PolicyRevisions, policy-server workloads, their
// Leases and Secrets on a managed cluster: the agent's namespaced RBAC is granted there.
const PolicyServerNamespace = "regent-system"

// AggregateToSpokeAddonLabel, set to "true" on a ClusterRole of a managed cluster, adds that
// role's rules to what the agent may do for policies (the aggregated ClusterRole
// "regent-spoke-addon-policies"): how a cluster's admin lets ConfigurationPolicies enforce a kind
// the defaults leave out.
const AggregateToSpokeAddonLabel = "regent.dev/aggregate-to-spoke-addon"
