package addonidentity

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HubRole is all the addon of one cluster may do on the hub: read the replicated policies of its
// own cluster namespace, write their status and the cluster's rolled-up policy reports, record
// Events there, and renew its own Lease (OCM's fallback when the managed cluster cannot hold it:
// addon-framework's lease updater with a hub config, a Lease named after the addon). Nothing cluster-wide, so one compromised cluster cannot
// read or change another's policies; and no other Lease, so it cannot renew or steal one. RBAC
// cannot limit create by name (the object has none when it is authorized): creating a Lease of
// another name is allowed, but never reading or renewing it.
func HubRole(clusterName string) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "regent-addon", Namespace: clusterName},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"policy.open-cluster-management.io"}, Resources: []string{"policies"}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"policy.open-cluster-management.io"}, Resources: []string{"policies/status"}, Verbs: []string{"get", "update", "patch"}},
			// The cluster's rolled-up policy reports (reports/rollup), one per replicated policy.
			{APIGroups: []string{"openreports.io"}, Resources: []string{"reports"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
			{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "update", "patch"}},
			// The cluster's policy encryption key, which the agent copies to the managed cluster to
			// decrypt what hub templates encrypted; no other Secret.
			{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{EncryptionKeySecret}, Verbs: []string{"get", "list", "watch"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"create"}},
			{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, ResourceNames: []string{AddonName}, Verbs: []string{"get", "update"}},
		},
	}
}

// HubRoleBinding grants HubRole to the addon's hub identity.
func HubRoleBinding(clusterName string, subject rbacv1.Subject) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "regent-addon", Namespace: clusterName},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "regent-addon"},
		Subjects:   []rbacv1.Subject{subject},
	}
}

// EncryptionKeySecret is the Secret in a cluster namespace holding the cluster's policy
// encryption key (OCM's name; templates.EncryptionKeySecret).
const EncryptionKeySecret = "policy-encryption-key"
