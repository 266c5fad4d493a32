package admissionpolicy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// A security-context field the user sets replaces Regent's default for that field only; a
// PolicyServer that sets none keeps Regent's restricted contexts exactly.
func TestApplyUserSettings_SecurityContexts_UserFieldsOverRegentsDefaults(t *testing.T) {
	plain := statefulSetPod(&kubewardenv1.PolicyServer{Spec: kubewardenv1.PolicyServerSpec{Image: "i"}}, "ns", map[string]string{"a": "b"})
	ps := &kubewardenv1.PolicyServer{Spec: kubewardenv1.PolicyServerSpec{Image: "i", SecurityContexts: &kubewardenv1.PolicyServerSecurity{
		Pod:       &corev1.PodSecurityContext{RunAsUser: ptr.To[int64](1000)},
		Container: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"NET_BIND_SERVICE"}}},
	}}}
	pod := statefulSetPod(ps, "ns", map[string]string{"a": "b"})
	psc, csc := pod.Spec.SecurityContext, pod.Spec.Containers[0].SecurityContext
	if ptr.Deref(psc.RunAsUser, 0) != 1000 || ptr.Deref(psc.RunAsGroup, 0) != policyServerUID || !ptr.Deref(psc.RunAsNonRoot, false) ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsUser 1000 and Regent's other defaults", psc)
	}
	// Capabilities are one field: the user's replaces Regent's drop ALL.
	if len(csc.Capabilities.Add) != 1 || len(csc.Capabilities.Drop) != 0 || !ptr.Deref(csc.ReadOnlyRootFilesystem, false) || ptr.Deref(csc.AllowPrivilegeEscalation, true) {
		t.Errorf("container securityContext %+v", csc)
	}
	if plain.Spec.Containers[0].SecurityContext.Capabilities.Drop[0] != "ALL" || ptr.Deref(plain.Spec.SecurityContext.RunAsUser, 0) != policyServerUID {
		t.Errorf("defaults changed without user settings: %+v %+v", plain.Spec.SecurityContext, plain.Spec.Containers[0].SecurityContext)
	}
}
