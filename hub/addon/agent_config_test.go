package addon

import (
	"context"
	"fmt"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	addonapiv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"regent.dev/regent/addonidentity"
	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// configs answers the one AddOnDeploymentConfig the ManagedClusterAddOn's status points at, as
// the hub's apiserver would (addon-framework's getter interface; the apiserver path is covered
// by deploy's install test).
type configs map[string]*addonapiv1beta1.AddOnDeploymentConfig

func (c configs) Get(_ context.Context, namespace, name string) (*addonapiv1beta1.AddOnDeploymentConfig, error) {
	if adc, ok := c[namespace+"/"+name]; ok {
		return adc, nil
	}
	return nil, fmt.Errorf("addondeploymentconfig %s/%s not found", namespace, name)
}

// addonWithConfig is a ManagedClusterAddOn whose status resolved to AddOnDeploymentConfig ns/name,
// as OCM's addon manager records it.
func addonWithConfig(ns, name string) *addonapiv1beta1.ManagedClusterAddOn {
	return &addonapiv1beta1.ManagedClusterAddOn{
		ObjectMeta: metav1.ObjectMeta{Name: addonidentity.AddonName, Namespace: "cluster1"},
		Status: addonapiv1beta1.ManagedClusterAddOnStatus{ConfigReferences: []addonapiv1beta1.ConfigReference{{
			ConfigGroupResource: addonapiv1beta1.ConfigGroupResource{Group: "addon.open-cluster-management.io", Resource: "addondeploymentconfigs"},
			DesiredConfig: &addonapiv1beta1.ConfigSpecHash{
				ConfigReferent: addonapiv1beta1.ConfigReferent{Namespace: ns, Name: name}, SpecHash: "recorded-by-ocm"},
		}}},
	}
}

func TestManifests_AddOnDeploymentConfigReachesTheDeployment(t *testing.T) {
	adc := &addonapiv1beta1.AddOnDeploymentConfig{
		ObjectMeta: metav1.ObjectMeta{Name: "regent-config", Namespace: "cluster1"},
		Spec: addonapiv1beta1.AddOnDeploymentConfigSpec{
			NodePlacement: &addonapiv1beta1.NodePlacement{
				NodeSelector: map[string]string{"node-role.kubernetes.io/infra": ""},
				Tolerations:  []corev1.Toleration{{Key: "infra", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
			},
			Registries:  []addonapiv1beta1.ImageMirror{{Source: "ghcr.io/regent-dev", Mirror: "mirror.example.com/regent-dev"}},
			ProxyConfig: addonapiv1beta1.ProxyConfig{HTTPSProxy: "http://proxy.example.com:3128", NoProxy: "10.0.0.0/8,.svc"},
			ResourceRequirements: []addonapiv1beta1.ContainerResourceRequirements{
				{ContainerID: "*:*:*", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}},
				{ContainerID: "deployments:regent-spoke-addon:spoke-addon", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("3Gi")}}},
				{ContainerID: "deployments:other-agent:*", Resources: corev1.ResourceRequirements{
					Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("5Gi")}}},
			},
			AgentInstallNamespace: "regent-agent",
		},
	}
	a := &agentAddon{image: "ghcr.io/regent-dev/regent:v9.9.9", configs: configs{"cluster1/regent-config": adc}}
	cluster := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"}}
	objs, err := a.Manifests(context.Background(), cluster, addonWithConfig("cluster1", "regent-config"))
	if err != nil {
		t.Fatal(err)
	}
	deploy, ps := find[*appsv1.Deployment](t, objs), find[*kubewardenv1.PolicyServer](t, objs)
	pod := deploy.Spec.Template.Spec
	c := pod.Containers[0]
	if deploy.Namespace != "regent-agent" || !slices.Contains(c.Args, "--install-namespace=regent-agent") {
		t.Errorf("namespace %s args %q, want the config's agentInstallNamespace", deploy.Namespace, c.Args)
	}
	if b := find[*rbacv1.ClusterRoleBinding](t, objs); b.Subjects[0].Namespace != "regent-agent" {
		t.Errorf("binding subject %+v", b.Subjects[0])
	}
	if want := "mirror.example.com/regent-dev/regent:v9.9.9"; c.Image != want || ps.Spec.Image != want {
		t.Errorf("images %s and %s, want the mirror %s", c.Image, ps.Spec.Image, want)
	}
	if pod.NodeSelector["node-role.kubernetes.io/infra"] != "" || len(pod.NodeSelector) != 1 || len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "infra" {
		t.Errorf("node placement %v %v", pod.NodeSelector, pod.Tolerations)
	}
	wantEnv := []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy.example.com:3128"}, {Name: "NO_PROXY", Value: "10.0.0.0/8,.svc"}}
	if !slices.Equal(c.Env, wantEnv) {
		t.Errorf("env %v, want %v", c.Env, wantEnv)
	}
	// The last matching entry wins; the other agent's does not match.
	if mem := c.Resources.Limits[corev1.ResourceMemory]; mem.String() != "3Gi" || len(c.Resources.Requests) != 0 {
		t.Errorf("resources %+v, want the spoke addon's own entry", c.Resources)
	}
}

func TestManifests_WithoutAConfigTheDefaultsAndTheCRDs(t *testing.T) {
	a := &agentAddon{image: "ghcr.io/regent-dev/regent:v9.9.9", configs: configs{}}
	cluster := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1",
		Annotations: map[string]string{clusterv1.ClusterImageRegistriesAnnotationKey: `{"registries":[{"source":"ghcr.io","mirror":"registry.local:5000"}]}`}}}
	addon := &addonapiv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addonidentity.AddonName, Namespace: "cluster1"}}
	objs, err := a.Manifests(context.Background(), cluster, addon)
	if err != nil {
		t.Fatal(err)
	}
	deploy := find[*appsv1.Deployment](t, objs)
	c := deploy.Spec.Template.Spec.Containers[0]
	if deploy.Namespace != addonidentity.DefaultInstallNamespace || c.Image != "registry.local:5000/regent-dev/regent:v9.9.9" {
		t.Errorf("namespace %s image %s: want the default namespace and the cluster annotation's mirror", deploy.Namespace, c.Image)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Limits.Memory().IsZero() || c.LivenessProbe == nil || c.ReadinessProbe == nil {
		t.Errorf("container without default resources or probes: %+v", c)
	}
	var names []string
	for _, o := range objs {
		if crd, ok := o.(*apiextensionsv1.CustomResourceDefinition); ok {
			names = append(names, crd.Name)
			if _, orphan := crd.Annotations[addonapiv1beta1.DeletionOrphanAnnotationKey]; !orphan {
				t.Errorf("CRD %s would be deleted, with every policy of its kind, when the addon is disabled", crd.Name)
			}
		}
	}
	for _, want := range []string{"policies.policy.open-cluster-management.io", "configurationpolicies.policy.open-cluster-management.io",
		"policyservers.policies.kubewarden.io", "policyrevisions.policies.kubewarden.io", "reports.openreports.io"} {
		if !slices.Contains(names, want) {
			t.Errorf("agent manifests lack CRD %s (have %v)", want, names)
		}
	}
	if slices.ContainsFunc(objs, func(o runtime.Object) bool {
		b, ok := o.(*rbacv1.ClusterRoleBinding)
		return ok && b.RoleRef.Name == "cluster-admin"
	}) {
		t.Error("the agent is bound to cluster-admin")
	}

	// An AddOnDeploymentConfig the status names but that cannot be read stops the rendering:
	// delivering defaults instead would silently drop the user's placement or mirror.
	if _, err := a.Manifests(context.Background(), cluster, addonWithConfig("cluster1", "missing")); err == nil {
		t.Error("rendered with an unreadable AddOnDeploymentConfig")
	}
}

func find[T any](t *testing.T, objs []runtime.Object) T {
	t.Helper()
	for _, o := range objs {
		if v, ok := any(o).(T); ok {
			return v
		}
	}
	var zero T
	t.Fatalf("no %T among the agent manifests", zero)
	return zero
}
