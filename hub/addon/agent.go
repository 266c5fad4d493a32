package addon

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"open-cluster-management.io/addon-framework/pkg/agent"
	"open-cluster-management.io/addon-framework/pkg/utils"
	addonapiv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"regent.dev/regent/addonidentity"
	"regent.dev/regent/api/crds"
	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// agentAddon describes the spoke addon to addon-framework.
type agentAddon struct {
	image string
	hub   client.Client
	// configs reads the AddOnDeploymentConfig a cluster's ManagedClusterAddOn resolves to (OCM's
	// addon manager records it in status.configReferences from the ClusterManagementAddOn's
	// defaultConfig or the ManagedClusterAddOn's own configs).
	configs utils.AddOnDeploymentConfigGetter
}

// Manifests are what runs on a managed cluster, delivered by ManifestWork: Regent's CRDs, the
// `regent spoke-addon` Deployment with its ServiceAccount and ClusterRole, and PolicyServer
// "default" (created once, then the cluster's own). The cluster's AddOnDeploymentConfig places
// the Deployment (nodePlacement), mirrors its image (registries), sets proxy variables
// (proxyConfig), its resources (resourceRequirements) and its namespace (agentInstallNamespace),
// read with addon-framework's helpers as OCM's own addons read it.
func (a *agentAddon) Manifests(ctx context.Context, cluster *clusterv1.ManagedCluster, addon *addonapiv1beta1.ManagedClusterAddOn) ([]runtime.Object, error) {
	config, err := utils.GetDesiredAddOnDeploymentConfig(addon, a.configs)
	if err != nil {
		return nil, fmt.Errorf("AddOnDeploymentConfig of %s/%s: %w", addon.Namespace, addon.Name, err)
	}
	ns, err := a.installNamespace(ctx, addon)
	if err != nil {
		return nil, err
	}
	image, err := agentImage(a.image, cluster, config)
	if err != nil {
		return nil, fmt.Errorf("agent image for %s: %w", cluster.Name, err)
	}
	workload, err := agentWorkload(cluster.Name, ns, image, config)
	if err != nil {
		return nil, err
	}
	definitions, err := crds.Regent()
	if err != nil {
		return nil, fmt.Errorf("agent CRDs: %w", err)
	}
	objs := make([]runtime.Object, 0, len(definitions)+len(workload)+1)
	for _, crd := range definitions {
		crd.APIVersion, crd.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
		// Disabling the addon removes the agent, not the cluster's policies and reports: deleting
		// a CRD deletes every object of its kind (and OCM's governance framework may share the
		// policy CRDs). The work agent leaves annotated manifests in place.
		metav1.SetMetaDataAnnotation(&crd.ObjectMeta, addonapiv1beta1.DeletionOrphanAnnotationKey, "")
		objs = append(objs, crd)
	}
	objs = append(objs, workload...)
	return append(objs, defaultPolicyServer(image)), nil
}

// installNamespace follows addon-framework's order, the one its registration controller writes to
// status.namespace (where OCM's registration agent puts the hub kubeconfig Secret): the default,
// then the ManagedClusterAddOn's install-namespace annotation, then the AddOnDeploymentConfig's
// agentInstallNamespace.
func (a *agentAddon) installNamespace(ctx context.Context, addon *addonapiv1beta1.ManagedClusterAddOn) (string, error) {
	ns := addonidentity.DefaultInstallNamespace
	if v := addon.Annotations[addonapiv1beta1.InstallNamespaceAnnotation]; v != "" {
		ns = v
	}
	fromConfig, err := utils.AgentInstallNamespaceFromDeploymentConfigFunc(a.configs)(ctx, addon)
	if err != nil {
		return "", fmt.Errorf("install namespace of %s/%s: %w", addon.Namespace, addon.Name, err)
	}
	if fromConfig != "" {
		ns = fromConfig
	}
	return ns, nil
}

// defaultPolicyServer is the PolicyServer admission policies name when they name none. The work
// agent creates it once and leaves it to the cluster's admins (ManifestConfigs: CreateOnly), so
// their replicas, resources or image pin are not reverted.
func defaultPolicyServer(image string) *kubewardenv1.PolicyServer {
	return &kubewardenv1.PolicyServer{
		TypeMeta:   metav1.TypeMeta{APIVersion: kubewardenv1.GroupVersion.String(), Kind: "PolicyServer"},
		ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec:       kubewardenv1.PolicyServerSpec{Image: image, Replicas: 1},
	}
}

// GetAgentAddonOptions: a client certificate for the agent, RBAC limited to its cluster
// namespace, health from the agent's Lease, AddOnDeploymentConfig as the supported configuration.
func (a *agentAddon) GetAgentAddonOptions() agent.AgentAddonOptions {
	return agent.AgentAddonOptions{
		AddonName: addonidentity.AddonName,
		Registration: &agent.RegistrationOption{
			Configurations:   agent.KubeClientSignerConfigurations(addonidentity.AddonName, addonidentity.AgentName),
			CSRApproveCheck:  utils.DefaultCSRApprover(addonidentity.AgentName),
			PermissionConfig: a.grantHubRole,
		},
		HealthProber: &agent.HealthProber{Type: agent.HealthProberTypeLease},
		// The cluster's image-registries annotation mirrors the agent's image: redeploy on change.
		AgentDeployTriggerClusterFilter: utils.ClusterImageRegistriesAnnotationChanged,
		AgentInstallNamespace:           utils.AgentInstallNamespaceFromDeploymentConfigFunc(a.configs),
		SupportedConfigGVRs:             []schema.GroupVersionResource{utils.AddOnDeploymentConfigGVR},
		ManifestConfigs: []workv1.ManifestConfigOption{{
			ResourceIdentifier: workv1.ResourceIdentifier{Group: kubewardenv1.GroupVersion.Group, Resource: "policyservers", Name: "default"},
			UpdateStrategy:     &workv1.UpdateStrategy{Type: workv1.UpdateStrategyTypeCreateOnly},
		}},
	}
}

// grantHubRole binds addonidentity.HubRole in the cluster namespace to the group OCM puts in every
// certificate it issues for this addon on this cluster.
func (a *agentAddon) grantHubRole(ctx context.Context, cluster *clusterv1.ManagedCluster, _ *addonapiv1beta1.ManagedClusterAddOn) error {
	want := addonidentity.HubRole(cluster.Name)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, a.hub, role, func() error { role.Rules = want.Rules; return nil }); err != nil {
		return fmt.Errorf("addon hub role in %s: %w", cluster.Name, err)
	}
	wantBinding := addonidentity.HubRoleBinding(cluster.Name, rbacv1.Subject{APIGroup: rbacv1.GroupName, Kind: rbacv1.GroupKind, Name: addonidentity.HubGroup(cluster.Name)})
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: wantBinding.Name, Namespace: wantBinding.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, a.hub, binding, func() error {
		binding.RoleRef, binding.Subjects = wantBinding.RoleRef, wantBinding.Subjects
		return nil
	}); err != nil {
		return fmt.Errorf("addon hub role binding in %s: %w", cluster.Name, err)
	}
	return nil
}

// AgentManifests renders the agent exactly as the addon manager delivers it to cluster, whose
// ManagedClusterAddOn is addon and whose AddOnDeploymentConfig configs reads: what an install
// test applies to a real cluster, and what a user can inspect before enabling the addon.
func AgentManifests(ctx context.Context, image string, configs utils.AddOnDeploymentConfigGetter, cluster *clusterv1.ManagedCluster, addon *addonapiv1beta1.ManagedClusterAddOn) ([]runtime.Object, error) {
	if image == "" {
		image = DefaultImage
	}
	return (&agentAddon{image: image, configs: configs}).Manifests(ctx, cluster, addon)
}
