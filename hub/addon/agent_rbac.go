package addon

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"regent.dev/regent/addonidentity"
)

// The agent's RBAC on a managed cluster is split the way Kyverno splits its controllers': what
// the agent's own controllers do is a fixed core (agentCoreRole, and Roles in the two namespaces
// it works in); what ConfigurationPolicies may read and enforce is an aggregated ClusterRole
// (agentPoliciesRole) whose rules are the union of every ClusterRole labelled
// addonidentity.AggregateToSpokeAddonLabel=true — the defaults below, and whatever a cluster's
// admin adds. No rule names every verb on every resource.
const (
	agentPoliciesRoleName = agentDeployment + "-policies"
	agentReadRoleName     = agentPoliciesRoleName + "-read"
	agentEnforceRoleName  = agentPoliciesRoleName + "-enforce"
)

var (
	readVerbs  = []string{"get", "list", "watch"}
	writeVerbs = []string{"create", "update", "patch", "delete"}
	allVerbs   = append(append([]string{}, readVerbs...), writeVerbs...)
)

// agentCoreRole is what the agent's controllers do cluster-wide, read off spoke-addon: spec and
// template sync write the policy copies and their templates (Regent's policy kinds, and OCM's
// OperatorPolicy and CertificatePolicy, whose own controllers evaluate them); status sync
// and the ConfigurationPolicy controller write their status; the admission policy controller
// turns policies into PolicyRevisions and webhook configurations, and writes each PolicyServer's
// ClusterRole and binding, which the API server allows only to a writer holding what they grant
// (SubjectAccessReviews, reports, events, policy listing; the reads come from the read member);
// the report aggregator writes openreports Reports from the per-resource reports; the
// ConfigurationPolicy controller watches namespaces and CRDs to re-evaluate; the agent creates
// the namespaces it works in.
func agentCoreRole() *rbacv1.ClusterRole {
	return clusterRole(agentDeployment, nil, []rbacv1.PolicyRule{
		{APIGroups: []string{"policy.open-cluster-management.io"}, Verbs: allVerbs,
			Resources: []string{"policies", "policies/status", "policies/finalizers", "configurationpolicies", "configurationpolicies/status",
				"operatorpolicies", "certificatepolicies"}},
		{APIGroups: []string{"policies.kubewarden.io"}, Verbs: allVerbs,
			Resources: []string{"clusteradmissionpolicies", "clusteradmissionpolicies/status", "clusteradmissionpolicies/finalizers",
				"admissionpolicies", "admissionpolicies/status", "admissionpolicies/finalizers",
				"clusteradmissionpolicygroups", "clusteradmissionpolicygroups/status", "clusteradmissionpolicygroups/finalizers",
				"admissionpolicygroups", "admissionpolicygroups/status", "admissionpolicygroups/finalizers",
				"policyservers", "policyservers/status", "policyservers/finalizers", "policyrevisions", "policyrevisions/status"}},
		{APIGroups: []string{"reports.regent.dev"}, Resources: []string{"resourcereports", "clusterresourcereports"}, Verbs: allVerbs},
		{APIGroups: []string{"openreports.io"}, Resources: []string{"reports", "clusterreports"}, Verbs: allVerbs},
		{APIGroups: []string{"admissionregistration.k8s.io"}, Resources: []string{"validatingwebhookconfigurations", "mutatingwebhookconfigurations"}, Verbs: allVerbs},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"clusterroles", "clusterrolebindings"}, Verbs: allVerbs},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: readVerbs},
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch", "create"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "update", "patch"}},
	})
}

// policyServerNamespaceRole is what the admission policy controller does in the policy servers'
// namespace: their StatefulSets and leader Deployments, Services, claims, NetworkPolicies,
// PodDisruptionBudgets, ServiceAccounts, Roles and
// bindings, serving and signing Secrets, CA bundle ConfigMaps and replica Leases; it deletes a
// replica's pod whose cache volume is stale. Secrets and workloads stay writable there only: a
// cluster-wide Secret or StatefulSet write would let it act as any ServiceAccount.
func policyServerNamespaceRole() *rbacv1.Role {
	return role(addonidentity.PolicyServerNamespace, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps", "services", "serviceaccounts", "persistentvolumeclaims"}, Verbs: allVerbs},
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "delete"}},
		{APIGroups: []string{"apps"}, Resources: []string{"statefulsets", "deployments"}, Verbs: allVerbs},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: allVerbs},
		{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: allVerbs},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}, Verbs: allVerbs},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: allVerbs},
	})
}

// installNamespaceRole: the agent's Lease, which OCM's registration agent turns into the
// ManagedClusterAddOn's Available condition (addon-framework's lease updater gets, creates and
// renews it).
func installNamespaceRole(ns string) *rbacv1.Role {
	return role(ns, []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "create", "update"}},
	})
}

// clusterNamespaceRole: the cluster's policy encryption key, which the agent copies from the hub
// (spoke-addon/secretsync) into the cluster namespace, where ConfigurationPolicies decrypt with
// it. create cannot be limited by name; that namespace holds only the policy copies.
func clusterNamespaceRole(cluster string) *rbacv1.Role {
	return role(cluster, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{addonidentity.EncryptionKeySecret}, Verbs: []string{"get", "update", "delete"}},
	})
}

// agentPoliciesRole is filled by the cluster's ClusterRole aggregation controller with the rules
// of every ClusterRole labelled addonidentity.AggregateToSpokeAddonLabel=true.
func agentPoliciesRole() *rbacv1.ClusterRole {
	r := clusterRole(agentPoliciesRoleName, nil, nil)
	r.AggregationRule = &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{
		{MatchLabels: map[string]string{addonidentity.AggregateToSpokeAddonLabel: "true"}}}}
	return r
}

// agentReadRole lets ConfigurationPolicies inform on any kind, template sync watch any
// dependency, and the agent grant a PolicyServer's context-aware lookups and background scan of
// any kind (it may grant only reads it holds). Reading is broad for those reasons; writing is not.
func agentReadRole() *rbacv1.ClusterRole {
	return clusterRole(agentReadRoleName, aggregated(), []rbacv1.PolicyRule{
		{APIGroups: []string{"*"}, Resources: []string{"*"}, Verbs: readVerbs},
	})
}

// agentEnforceRole is what ConfigurationPolicies enforce by default: the namespace-level
// configuration OCM's policy-collection enforces (namespaces, their quotas, limits, network
// policies, ConfigMaps, ServiceAccounts, Roles and bindings). Workloads and Secrets are left
// out on purpose: writing them in any namespace is running as any ServiceAccount there. Writing
// Roles stays bounded by RBAC itself: the agent can grant only what it holds.
func agentEnforceRole() *rbacv1.ClusterRole {
	return clusterRole(agentEnforceRoleName, aggregated(), []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces", "configmaps", "limitranges", "resourcequotas", "serviceaccounts"}, Verbs: writeVerbs},
		{APIGroups: []string{"networking.k8s.io"}, Resources: []string{"networkpolicies"}, Verbs: writeVerbs},
		{APIGroups: []string{"rbac.authorization.k8s.io"}, Resources: []string{"roles", "rolebindings"}, Verbs: writeVerbs},
	})
}

// agentRBAC is every RBAC object of the agent whose ServiceAccount is sa in ns, in apply order:
// roles before their bindings, the aggregated role's members before it.
func agentRBAC(sa, ns string) []runtime.Object {
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: ns}}
	core, policies := agentCoreRole(), agentPoliciesRole()
	psRole, installRole := policyServerNamespaceRole(), installNamespaceRole(ns)
	objs := []runtime.Object{
		core, agentReadRole(), agentEnforceRole(), policies,
		clusterRoleBinding(core.Name, subject), clusterRoleBinding(policies.Name, subject),
		psRole, roleBinding(psRole, subject),
	}
	// Installed into the policy servers' namespace, the agent's Lease is covered by that Role.
	if ns == psRole.Namespace {
		return objs
	}
	return append(objs, installRole, roleBinding(installRole, subject))
}

func aggregated() map[string]string {
	return map[string]string{addonidentity.AggregateToSpokeAddonLabel: "true"}
}

func clusterRole(name string, labels map[string]string, rules []rbacv1.PolicyRule) *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Rules:      rules,
	}
}

func role(ns string, rules []rbacv1.PolicyRule) *rbacv1.Role {
	return &rbacv1.Role{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
		ObjectMeta: metav1.ObjectMeta{Name: agentDeployment, Namespace: ns},
		Rules:      rules,
	}
}

func clusterRoleBinding(roleName string, subjects []rbacv1.Subject) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: roleName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: roleName},
		Subjects:   subjects,
	}
}

func roleBinding(r *rbacv1.Role, subjects []rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: r.Name, Namespace: r.Namespace},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: r.Name},
		Subjects:   subjects,
	}
}
