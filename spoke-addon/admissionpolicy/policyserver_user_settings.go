package admissionpolicy

import (
	"encoding/json"
	"maps"

	corev1 "k8s.io/api/core/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// What a Kubewarden PolicyServer's spec asks of the pods, applied over the pod Regent builds.
// Regent's defaults stay where the user says nothing: the labels it selects pods by, the
// environment its arguments read, and each security-context field the user leaves unset.

// dockerConfigVolume holds the PolicyServer's imagePullSecret as a Docker config.json; DOCKER_CONFIG
// points go-containerregistry's default keychain (module pulls and policies' OCI host calls) at it.
const (
	dockerConfigVolume = "imagepullsecret"
	dockerConfigMount  = "/docker"
	dockerConfigEnv    = "DOCKER_CONFIG"
)

// workloadLabels are the PolicyServer's labels with Regent's own over them: a user's label never
// changes what a selector, a NetworkPolicy or a monitor finds.
func workloadLabels(ps *kubewardenv1.PolicyServer, system map[string]string) map[string]string {
	out := maps.Clone(ps.Spec.Labels)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, system)
	return out
}

// applyUserSettings puts the PolicyServer's annotations, environment, security contexts,
// scheduling and registry credentials into pod, whose container 0 is the policy server.
func applyUserSettings(ps *kubewardenv1.PolicyServer, pod *corev1.PodTemplateSpec) {
	spec := ps.Spec
	if len(spec.Annotations) > 0 {
		pod.Annotations = maps.Clone(spec.Annotations)
	}
	c := &pod.Spec.Containers[0]
	own := map[string]bool{}
	for _, e := range c.Env {
		own[e.Name] = true
	}
	if spec.ImagePullSecret != "" {
		own[dockerConfigEnv] = true
		c.Env = append(c.Env, corev1.EnvVar{Name: dockerConfigEnv, Value: dockerConfigMount})
		c.VolumeMounts = append(c.VolumeMounts, corev1.VolumeMount{Name: dockerConfigVolume, MountPath: dockerConfigMount, ReadOnly: true})
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: dockerConfigVolume, VolumeSource: corev1.VolumeSource{
			Secret: &corev1.SecretVolumeSource{SecretName: spec.ImagePullSecret,
				Items: []corev1.KeyToPath{{Key: corev1.DockerConfigJsonKey, Path: "config.json"}}}}})
	}
	for _, e := range spec.Env {
		if !own[e.Name] {
			c.Env = append(c.Env, *e.DeepCopy())
		}
	}
	if sc := spec.SecurityContexts; sc != nil {
		if sc.Pod != nil {
			pod.Spec.SecurityContext = overlay(pod.Spec.SecurityContext, sc.Pod)
		}
		if sc.Container != nil {
			c.SecurityContext = overlay(c.SecurityContext, sc.Container)
		}
	}
	if spec.Affinity != nil {
		pod.Spec.Affinity = spec.Affinity.DeepCopy()
	}
	for _, t := range spec.Tolerations {
		pod.Spec.Tolerations = append(pod.Spec.Tolerations, *t.DeepCopy())
	}
	pod.Spec.PriorityClassName = spec.PriorityClassName
}

// overlay is def with every top-level field user sets replacing def's: a user who sets
// runAsUser keeps the default seccomp profile, one who sets capabilities owns all of them.
func overlay[T any](def, user *T) *T {
	base := map[string]json.RawMessage{}
	over := map[string]json.RawMessage{}
	if b, err := json.Marshal(def); err == nil {
		_ = json.Unmarshal(b, &base)
	}
	b, err := json.Marshal(user)
	if err != nil || json.Unmarshal(b, &over) != nil {
		return user
	}
	maps.Copy(base, over)
	out := new(T)
	b, err = json.Marshal(base)
	if err != nil || json.Unmarshal(b, out) != nil {
		return user
	}
	return out
}
