package admissionpolicy

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// A PolicyServer's verificationConfig reaches every policy server pod as Kubewarden lays it
// out: the ConfigMap's verification-config key mounted read-only and named by
// --verification-config, on the replicas and on the leader alike.
func TestPolicyServerPods_VerificationConfig_IsMountedAndPassed(t *testing.T) {
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "signed"},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", VerificationConfig: "trusted-keys"}}
	for role, pod := range map[string]func() []string{
		"replica": func() []string { return check(t, statefulSetPod(ps, "regent-system", nil).Spec) },
		"leader":  func() []string { return check(t, leaderPod(ps, "regent-system").Spec) },
	} {
		if args := pod(); !slices.Contains(args, "--verification-config=/verification/verification-config") {
			t.Errorf("%s: args %v do not name the verification config", role, args)
		}
	}
	plain := statefulSetPod(&kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev"}}, "regent-system", nil)
	for _, a := range plain.Spec.Containers[0].Args {
		if a == "--verification-config=/verification/verification-config" {
			t.Error("a PolicyServer without verificationConfig verifies signatures")
		}
	}
}

// check finds the verification volume and its mount, and returns the container's args.
func check(t *testing.T, spec corev1.PodSpec) []string {
	t.Helper()
	var found bool
	for _, v := range spec.Volumes {
		if v.Name == verificationVolume && v.ConfigMap != nil && v.ConfigMap.Name == "trusted-keys" {
			found = len(v.ConfigMap.Items) == 1 && v.ConfigMap.Items[0].Key == "verification-config"
		}
	}
	if !found {
		t.Errorf("no volume of the ConfigMap's verification-config key: %+v", spec.Volumes)
	}
	c := spec.Containers[0]
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
		return m.Name == verificationVolume && m.MountPath == verificationMount && m.ReadOnly
	}) {
		t.Errorf("verification volume not mounted read-only: %+v", c.VolumeMounts)
	}
	return c.Args
}
