package addon

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"open-cluster-management.io/addon-framework/pkg/utils"
	addonapiv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"

	"regent.dev/regent/addonidentity"
)

// agentDeployment and agentContainer name the spoke addon's workload; an AddOnDeploymentConfig's
// resourceRequirements address it as deployments:regent-spoke-addon:spoke-addon.
const (
	agentDeployment = "regent-spoke-addon"
	agentContainer  = "spoke-addon"
	probePort       = 8081
	metricsPort     = 8080
)

// agentResources are the container's requests and limits unless an AddOnDeploymentConfig says
// otherwise: a request that schedules it beside OCM's own agents, a memory limit with room for the
// informer caches of a large cluster.
var agentResources = corev1.ResourceRequirements{
	Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
	Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")},
}

// agentWorkload is the spoke addon's ServiceAccount, its RBAC (agentRBAC), the policy servers'
// namespace and the Deployment in ns, shaped by the AddOnDeploymentConfig config (nil: none
// applies).
func agentWorkload(clusterName, ns, image string, config *addonapiv1beta1.AddOnDeploymentConfig) ([]runtime.Object, error) {
	labels := map[string]string{"app": agentDeployment}
	sa := &corev1.ServiceAccount{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
		ObjectMeta: metav1.ObjectMeta{Name: agentDeployment, Namespace: ns},
	}
	// The policy servers' namespace carries the agent's Role there, so it arrives first; like the
	// CRDs it stays when the addon is disabled, with the PolicyServers' workloads in it.
	psNamespace := &corev1.Namespace{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: addonidentity.PolicyServerNamespace,
			Annotations: map[string]string{addonapiv1beta1.DeletionOrphanAnnotationKey: ""}},
	}
	container := corev1.Container{
		Name:  agentContainer,
		Image: image,
		Args: []string{"spoke-addon", "--hub-kubeconfig=/var/run/hub/kubeconfig",
			"--cluster-name=" + clusterName, "--install-namespace=" + ns, "--admission-namespace=" + addonidentity.PolicyServerNamespace, "--leader-elect",
			// A PolicyServer naming Kubewarden's image runs the addon's own (mirrored) image.
			"--policy-server-image=" + image,
			fmt.Sprintf("--metrics-bind-address=:%d", metricsPort), fmt.Sprintf("--health-probe-bind-address=:%d", probePort)},
		Ports: []corev1.ContainerPort{
			{Name: "metrics", ContainerPort: metricsPort},
			{Name: "probes", ContainerPort: probePort},
		},
		LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("probes")}},
			PeriodSeconds: 20, FailureThreshold: 3},
		ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromString("probes")}},
			PeriodSeconds: 10},
		Resources:       *agentResources.DeepCopy(),
		SecurityContext: restrictedContainer(),
		VolumeMounts: []corev1.VolumeMount{
			{Name: "hub-kubeconfig", MountPath: "/var/run/hub", ReadOnly: true},
			{Name: "tmp", MountPath: "/tmp"},
		},
	}
	pod := corev1.PodSpec{
		ServiceAccountName: sa.Name,
		SecurityContext:    restrictedPod(),
		Containers:         []corev1.Container{container},
		Volumes: []corev1.Volume{
			{Name: "hub-kubeconfig", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: addonidentity.HubKubeconfigSecret}}},
			{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		},
	}
	if config != nil {
		if err := applyDeploymentConfig(&pod, *config); err != nil {
			return nil, fmt.Errorf("AddOnDeploymentConfig %s/%s: %w", config.Namespace, config.Name, err)
		}
	}
	deploy := &appsv1.Deployment{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{Name: agentDeployment, Namespace: ns, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: pod},
		},
	}
	objs := []runtime.Object{sa}
	if ns != psNamespace.Name {
		objs = append(objs, psNamespace)
	}
	objs = append(objs, agentRBAC(sa.Name, ns)...)
	// The cluster namespace, which the agent also creates on start, comes with the agent's Role
	// there; like the policy servers' namespace it stays when the addon is disabled.
	clusterNamespace := &corev1.Namespace{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: clusterName,
			Annotations: map[string]string{addonapiv1beta1.DeletionOrphanAnnotationKey: ""}},
	}
	keyRole := clusterNamespaceRole(clusterName)
	subject := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}
	objs = append(objs, clusterNamespace, keyRole, roleBinding(keyRole, subject))
	return append(objs, deploy), nil
}

// applyDeploymentConfig puts an AddOnDeploymentConfig's node placement, proxy variables and
// resource requirements on the agent's pod with the meaning OCM's templated addons give them
// (addon-framework's pkg/addonfactory, which this package does not import: it brings Helm's whole
// dependency tree into the regent binary for three small conversions).
func applyDeploymentConfig(pod *corev1.PodSpec, config addonapiv1beta1.AddOnDeploymentConfig) error {
	if p := config.Spec.NodePlacement; p != nil {
		pod.NodeSelector = p.NodeSelector
		pod.Tolerations = p.Tolerations
	}
	pod.Containers[0].Env = append(pod.Containers[0].Env, proxyEnv(config.Spec.ProxyConfig)...)
	for i := range pod.Containers {
		id := fmt.Sprintf("deployments:%s:%s", agentDeployment, pod.Containers[i].Name)
		for _, r := range config.Spec.ResourceRequirements {
			matched, err := containerIDMatches(r.ContainerID, id)
			if err != nil {
				return err
			}
			if matched {
				pod.Containers[i].Resources = *r.Resources.DeepCopy()
			}
		}
	}
	return nil
}

// proxyEnv: HTTP_PROXY and HTTPS_PROXY, and NO_PROXY only beside one of them, as OCM's addons
// set them. The proxy's CA bundle is not passed on: Go's TLS trusts the image's roots.
func proxyEnv(p addonapiv1beta1.ProxyConfig) []corev1.EnvVar {
	if p.HTTPProxy == "" && p.HTTPSProxy == "" {
		return nil
	}
	var env []corev1.EnvVar
	for _, v := range []corev1.EnvVar{{Name: "HTTP_PROXY", Value: p.HTTPProxy}, {Name: "HTTPS_PROXY", Value: p.HTTPSProxy}, {Name: "NO_PROXY", Value: p.NoProxy}} {
		if v.Value != "" {
			env = append(env, v)
		}
	}
	return env
}

// containerIDMatches reads an AddOnDeploymentConfig container ID, <resource>:<name>:<container>
// where "*" stands for any one segment, against id.
func containerIDMatches(pattern, id string) (bool, error) {
	parts := strings.Split(pattern, ":")
	if len(parts) != 3 {
		return false, fmt.Errorf("resourceRequirements containerID %q: want <resource>:<name>:<container>", pattern)
	}
	for i, p := range parts {
		if p == "*" {
			parts[i] = "[^:]+"
		} else {
			parts[i] = regexp.QuoteMeta(p)
		}
	}
	return regexp.MustCompile("^" + strings.Join(parts, ":") + "$").MatchString(id), nil
}

// agentImage mirrors image as OCM mirrors addon images: the AddOnDeploymentConfig's registries
// first and, when none of them matched, the ManagedCluster's image-registries annotation. Both are
// read by addon-framework's own override, which takes them in the annotation's JSON form.
func agentImage(image string, cluster *clusterv1.ManagedCluster, config *addonapiv1beta1.AddOnDeploymentConfig) (string, error) {
	if config != nil && len(config.Spec.Registries) > 0 {
		raw, err := json.Marshal(map[string]any{"registries": config.Spec.Registries})
		if err != nil {
			return "", err
		}
		mirrored, err := utils.OverrideImageByAnnotation(map[string]string{clusterv1.ClusterImageRegistriesAnnotationKey: string(raw)}, image)
		if err != nil || mirrored != image {
			return mirrored, err
		}
	}
	if cluster == nil {
		return image, nil
	}
	return utils.OverrideImageByAnnotation(cluster.Annotations, image)
}

// restrictedPod and restrictedContainer satisfy Pod Security's restricted profile: non-root,
// RuntimeDefault seccomp, no privilege escalation, no capabilities; the root filesystem is
// read-only too (/tmp is an emptyDir).
func restrictedPod() *corev1.PodSecurityContext {
	return &corev1.PodSecurityContext{
		RunAsNonRoot:   ptr.To(true),
		SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

func restrictedContainer() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		RunAsNonRoot:             ptr.To(true),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}
