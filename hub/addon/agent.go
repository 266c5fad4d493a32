package addon

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"open-cluster-management.io/addon-framework/pkg/agent"
	"open-cluster-management.io/addon-framework/pkg/utils"
	addonapiv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"regent.dev/regent/addonidentity"
)

// agentName is the identity the agent's hub client certificate is issued for.
const agentName = "regent-agent"

// hubKubeconfigSecret is where OCM's registration agent writes the agent's hub kubeconfig.
const hubKubeconfigSecret = addonidentity.AddonName + "-hub-kubeconfig"

// agentAddon describes the spoke addon to addon-framework.
type agentAddon struct {
	image string
	hub   client.Client
}

// Manifests are what runs on a managed cluster: the `regent spoke-addon` Deployment with its
// ServiceAccount, allowed to manage what ConfigurationPolicies enforce (as OCM's
// config-policy-controller is).
func (a *agentAddon) Manifests(_ context.Context, cluster *clusterv1.ManagedCluster, addon *addonapiv1beta1.ManagedClusterAddOn) ([]runtime.Object, error) {
	ns := installNamespace(addon)
	labels := map[string]string{"app": "regent-spoke-addon"}
	sa := &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: "regent-spoke-addon", Namespace: ns},
	}
	binding := &rbacv1.ClusterRoleBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: "regent-spoke-addon"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}},
	}
	deploy := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: "regent-spoke-addon", Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: sa.Name,
					Containers: []corev1.Container{{
						Name:  "spoke-addon",
						Image: a.image,
						Args: []string{"spoke-addon", "--hub-kubeconfig=/var/run/hub/kubeconfig",
							"--cluster-name=" + cluster.Name, "--install-namespace=" + ns},
						VolumeMounts: []corev1.VolumeMount{{Name: "hub-kubeconfig", MountPath: "/var/run/hub", ReadOnly: true}},
						SecurityContext: &corev1.SecurityContext{
							AllowPrivilegeEscalation: ptr.To(false), RunAsNonRoot: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true),
						},
					}},
					Volumes: []corev1.Volume{{Name: "hub-kubeconfig", VolumeSource: corev1.VolumeSource{
						Secret: &corev1.SecretVolumeSource{SecretName: hubKubeconfigSecret}}}},
				},
			},
		},
	}
	return []runtime.Object{sa, binding, deploy}, nil
}

// GetAgentAddonOptions: a client certificate for the agent, RBAC limited to its cluster
// namespace, and health from the agent's Lease.
func (a *agentAddon) GetAgentAddonOptions() agent.AgentAddonOptions {
	return agent.AgentAddonOptions{
		AddonName: addonidentity.AddonName,
		Registration: &agent.RegistrationOption{
			Configurations:   agent.KubeClientSignerConfigurations(addonidentity.AddonName, agentName),
			CSRApproveCheck:  utils.DefaultCSRApprover(agentName),
			PermissionConfig: a.grantHubRole,
		},
		HealthProber: &agent.HealthProber{Type: agent.HealthProberTypeLease},
	}
}

// grantHubRole binds addonidentity.HubRole in the cluster namespace to the group OCM puts in every
// certificate it issues for this addon on this cluster.
func (a *agentAddon) grantHubRole(ctx context.Context, cluster *clusterv1.ManagedCluster, _ *addonapiv1beta1.ManagedClusterAddOn) error {
	group := fmt.Sprintf("system:open-cluster-management:cluster:%s:addon:%s", cluster.Name, addonidentity.AddonName)
	want := addonidentity.HubRole(cluster.Name)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, a.hub, role, func() error { role.Rules = want.Rules; return nil }); err != nil {
		return fmt.Errorf("addon hub role in %s: %w", cluster.Name, err)
	}
	wantBinding := addonidentity.HubRoleBinding(cluster.Name, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: group})
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: wantBinding.Name, Namespace: wantBinding.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, a.hub, binding, func() error {
		binding.RoleRef, binding.Subjects = wantBinding.RoleRef, wantBinding.Subjects
		return nil
	}); err != nil {
		return fmt.Errorf("addon hub role binding in %s: %w", cluster.Name, err)
	}
	return nil
}

func installNamespace(addon *addonapiv1beta1.ManagedClusterAddOn) string {
	if addon != nil {
		if ns := addon.Annotations["addon.open-cluster-management.io/install-namespace"]; ns != "" {
			return ns
		}
	}
	return addonidentity.DefaultInstallNamespace
}
