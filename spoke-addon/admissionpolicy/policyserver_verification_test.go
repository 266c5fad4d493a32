package admissionpolicy

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
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
	for role, spec := range map[string]corev1.PodSpec{"replica": statefulSetPod(ps, "regent-system", nil).Spec, "leader": leaderPod(ps, "regent-system").Spec} {
		if slices.ContainsFunc(spec.Containers[0].Args, func(a string) bool { return strings.HasPrefix(a, "--sigstore-trust-config") }) {
			t.Errorf("%s: a PolicyServer without sigstoreTrustConfig is given a trust root", role)
		}
	}
	plain := statefulSetPod(&kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "plain"}, Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev"}}, "regent-system", nil)
	for _, a := range plain.Spec.Containers[0].Args {
		if a == "--verification-config=/verification/verification-config" {
			t.Error("a PolicyServer without verificationConfig verifies signatures")
		}
	}
}

// A PolicyServer's sigstoreTrustConfig reaches every policy server pod as Kubewarden lays it out:
// the ConfigMap's sigstore-trust-config key mounted read-only at /sigstore-trust and named by
// --sigstore-trust-config, on the replicas and on the leader alike.
func TestPolicyServerPods_SigstoreTrustConfig_IsMountedAndPassed(t *testing.T) {
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "keyless"},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", VerificationConfig: "trusted-keys", SigstoreTrustConfig: "private-sigstore"}}
	for role, spec := range map[string]corev1.PodSpec{"replica": statefulSetPod(ps, "regent-system", nil).Spec, "leader": leaderPod(ps, "regent-system").Spec} {
		if !slices.ContainsFunc(spec.Volumes, func(v corev1.Volume) bool {
			return v.Name == sigstoreTrustVolume && v.ConfigMap != nil && v.ConfigMap.Name == "private-sigstore" &&
				len(v.ConfigMap.Items) == 1 && v.ConfigMap.Items[0].Key == "sigstore-trust-config" && v.ConfigMap.Optional != nil && *v.ConfigMap.Optional
		}) {
			t.Errorf("%s: no optional volume of the ConfigMap's sigstore-trust-config key: %+v", role, spec.Volumes)
		}
		c := spec.Containers[0]
		if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == sigstoreTrustVolume && m.MountPath == "/sigstore-trust" && m.ReadOnly
		}) {
			t.Errorf("%s: trust config not mounted read-only at /sigstore-trust: %+v", role, c.VolumeMounts)
		}
		if !slices.Contains(c.Args, "--sigstore-trust-config=/sigstore-trust/sigstore-trust-config") {
			t.Errorf("%s: args %v do not name the trust config", role, c.Args)
		}
		if !slices.Contains(c.Args, "--verification-config=/verification/verification-config") {
			t.Errorf("%s: args %v do not name the verification config", role, c.Args)
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

// The policy server reads its verificationConfig at start: creating the ConfigMap after the
// PolicyServer, or editing it, rolls the replicas and the leader (a pod template annotation
// names its content), so the pods always trust what the ConfigMap says.
func TestPolicyServer_VerificationConfigEdited_RollsThePods(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config, func(o *Options) { o.WebhookURL, o.CABundle = nil, nil })
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "verifying"},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 1, VerificationConfig: "trusted-keys", SigstoreTrustConfig: "private-sigstore"}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	versionsOf := func(annotation string) (string, string) {
		var sts appsv1.StatefulSet
		var leader appsv1.Deployment
		if c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: serverObjectName(ps.Name)}, &sts) != nil ||
			c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: leaderWorkloadName(ps.Name)}, &leader) != nil {
			return "", ""
		}
		return sts.Spec.Template.Annotations[annotation], leader.Spec.Template.Annotations[annotation]
	}
	versions := func() (string, string) { return versionsOf(VerificationConfigAnnotation) }
	eventually(t, "pods marked as started without the ConfigMap", func() bool {
		s, l := versions()
		return s == "missing" && l == "missing"
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "trusted-keys", Namespace: testNamespace},
		Data: map[string]string{"verification-config": "apiVersion: v1\nallOf: []\n"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	var first string
	eventually(t, "pods rolled once the ConfigMap exists", func() bool {
		s, l := versions()
		first = s
		return s != "missing" && s != "" && s == l
	})
	update(t, c, cm, func() { cm.Data["verification-config"] = "apiVersion: v1\nallOf:\n  - kind: pubKey\n" })
	eventually(t, "pods rolled after the ConfigMap changed", func() bool {
		s, l := versions()
		return s != first && s != "missing" && s == l
	})

	// The trust root is read at start too: its ConfigMap rolls the pods the same way.
	if s, l := versionsOf(SigstoreTrustConfigAnnotation); s != "missing" || l != "missing" {
		t.Fatalf("trust config versions %q, %q before its ConfigMap exists; want missing", s, l)
	}
	trust := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "private-sigstore", Namespace: testNamespace},
		Data: map[string]string{"sigstore-trust-config": `{"mediaType": "application/vnd.dev.sigstore.clienttrustconfig.v0.1+json"}`}}
	if err := c.Create(ctx, trust); err != nil {
		t.Fatal(err)
	}
	var firstTrust string
	eventually(t, "pods rolled once the trust ConfigMap exists", func() bool {
		s, l := versionsOf(SigstoreTrustConfigAnnotation)
		firstTrust = s
		return s != "missing" && s != "" && s == l
	})
	update(t, c, trust, func() { trust.Data["sigstore-trust-config"] = `{"trustedRoot": {}}` })
	eventually(t, "pods rolled after the trust ConfigMap changed", func() bool {
		s, l := versionsOf(SigstoreTrustConfigAnnotation)
		return s != firstTrust && s != "missing" && s == l
	})
}
