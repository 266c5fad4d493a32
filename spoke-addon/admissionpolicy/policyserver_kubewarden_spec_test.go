package admissionpolicy

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/version"
)

// TestPolicyServer_KubewardenSpec_AppliesUnchangedAndReachesThePods applies Kubewarden
// PolicyServers (the shape of Kubewarden's example, and one setting every field Regent
// honours) with `kubectl apply --server-side`, wants every field read back as written, and
// follows each into the replicas' StatefulSet, the leader's Deployment, the metrics Service and
// the PodDisruptionBudget, Regent's own defaults kept where the user set nothing.
func TestPolicyServer_KubewardenSpec_AppliesUnchangedAndReachesThePods(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config, func(o *Options) { o.WebhookURL, o.CABundle = nil, nil })
	ctx := context.Background()
	kubectlBin, err := fleet.Binary(fleet.DefaultBinDir(), "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) []byte {
		t.Helper()
		out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig", hub.Kubeconfig}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return out
	}
	const fixture = "testdata/kubewarden-policyserver.yaml"
	kubectl("apply", "--server-side", "--field-manager=kubewarden-user", "-f", fixture)
	raw, err := os.ReadFile(fixture)
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range bytes.Split(raw, []byte("\n---\n")) {
		var want map[string]any
		if err := yaml.Unmarshal(doc, &want); err != nil {
			t.Fatal(err)
		}
		name := want["metadata"].(map[string]any)["name"].(string)
		var got map[string]any
		if err := json.Unmarshal(kubectl("get", "policyserver", name, "-o", "json"), &got); err != nil {
			t.Fatal(err)
		}
		for _, d := range missing("", want["spec"], got["spec"]) {
			t.Errorf("%s: spec%s", name, d)
		}
	}

	sts := &appsv1.StatefulSet{}
	eventually(t, "StatefulSet of kw-full", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: serverObjectName("kw-full")}, sts) == nil
	})
	leader := &appsv1.Deployment{}
	eventually(t, "leader Deployment of kw-full", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: leaderWorkloadName("kw-full")}, leader) == nil
	})
	for _, w := range []struct {
		name   string
		labels map[string]string
		pod    corev1.PodTemplateSpec
		app    string
	}{{sts.Name, sts.Labels, sts.Spec.Template, AppName}, {leader.Name, leader.Labels, leader.Spec.Template, leaderAppName}} {
		pod, ctr := w.pod.Spec, w.pod.Spec.Containers[0]
		// Labels: the user's, but never over the ones Regent selects its pods by.
		for _, labels := range []map[string]string{w.labels, w.pod.Labels} {
			if labels["team.example.com/tier"] != "admission" || labels[AppNameLabel] != w.app || labels[kubewardenv1.PolicyServerLabel] != "kw-full" {
				t.Errorf("%s: labels %v, want the user's tier label and Regent's selector labels", w.name, labels)
			}
		}
		if w.pod.Annotations["team.example.com/owner"] != "platform" {
			t.Errorf("%s: pod annotations %v", w.name, w.pod.Annotations)
		}
		env := map[string]corev1.EnvVar{}
		for _, e := range ctr.Env {
			if _, dup := env[e.Name]; dup {
				t.Errorf("%s: env %s twice", w.name, e.Name)
			}
			env[e.Name] = e
		}
		if env["KUBEWARDEN_LOG_LEVEL"].Value != "debug" || env["NODE_NAME"].ValueFrom == nil ||
			env["POD_IP"].ValueFrom == nil || env["POD_IP"].ValueFrom.FieldRef.FieldPath != "status.podIP" || env[dockerConfigEnv].Value != dockerConfigMount {
			t.Errorf("%s: env %+v, want the user's, Regent's POD_IP kept, and DOCKER_CONFIG for the pull secret", w.name, ctr.Env)
		}
		secret := ""
		for _, v := range pod.Volumes {
			if v.Name == dockerConfigVolume && v.Secret != nil && len(v.Secret.Items) == 1 && v.Secret.Items[0].Key == corev1.DockerConfigJsonKey {
				secret = v.Secret.SecretName
			}
		}
		mounted := slices.ContainsFunc(ctr.VolumeMounts, func(m corev1.VolumeMount) bool {
			return m.Name == dockerConfigVolume && m.MountPath == dockerConfigMount && m.ReadOnly
		})
		if secret != "registry-credentials" || !mounted {
			t.Errorf("%s: imagePullSecret volume %q, mounted %v", w.name, secret, mounted)
		}
		// Security: the user's fields, Regent's restricted defaults for the rest.
		psc, csc := pod.SecurityContext, ctr.SecurityContext
		if ptr.Deref(psc.RunAsUser, 0) != 1000 || ptr.Deref(psc.RunAsGroup, 0) != 1000 || !ptr.Deref(psc.RunAsNonRoot, false) ||
			psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault || ptr.Deref(psc.FSGroup, 0) != policyServerUID {
			t.Errorf("%s: pod securityContext %+v", w.name, psc)
		}
		if ptr.Deref(csc.RunAsUser, 0) != 1000 || csc.Capabilities == nil || !slices.Equal(csc.Capabilities.Add, []corev1.Capability{"NET_BIND_SERVICE"}) ||
			!ptr.Deref(csc.ReadOnlyRootFilesystem, false) || ptr.Deref(csc.AllowPrivilegeEscalation, true) {
			t.Errorf("%s: container securityContext %+v", w.name, csc)
		}
		if pod.Affinity == nil || pod.Affinity.PodAntiAffinity == nil || len(pod.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution) != 1 {
			t.Errorf("%s: affinity %+v", w.name, pod.Affinity)
		}
		if len(pod.Tolerations) != 1 || pod.Tolerations[0].Key != "dedicated" || pod.Tolerations[0].Effect != corev1.TaintEffectNoSchedule {
			t.Errorf("%s: tolerations %+v", w.name, pod.Tolerations)
		}
		// Kubewarden's image is served by Regent's (policyserver_image_test.go).
		if pod.PriorityClassName != "system-cluster-critical" || ctr.Image != version.Image() {
			t.Errorf("%s: priorityClassName %q, image %q", w.name, pod.PriorityClassName, ctr.Image)
		}
	}
	if res := sts.Spec.Template.Spec.Containers[0].Resources; res.Limits.Cpu().String() != "1" || res.Limits.Memory().String() != "512Mi" || res.Requests.Cpu().String() != "100m" {
		t.Errorf("resources %+v, want the PolicyServer's limits and requests", res)
	}
	if got := sts.Spec.Selector.MatchLabels; got[AppNameLabel] != AppName || len(got) != 2 {
		t.Errorf("StatefulSet selector %v: a user's labels must not change it", got)
	}

	// Kubewarden's example: its env reaches the container, Regent's security defaults stay.
	example := &appsv1.StatefulSet{}
	eventually(t, "StatefulSet of kw-example", func() bool {
		return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: serverObjectName("kw-example")}, example) == nil
	})
	if env := example.Spec.Template.Spec.Containers[0].Env; len(env) != 3 || env[0].Name != "POD_IP" || env[1].Name != "KUBEWARDEN_LOG_LEVEL" {
		t.Errorf("kw-example env %+v", env)
	}
	if sc := example.Spec.Template.Spec.SecurityContext; ptr.Deref(sc.RunAsUser, 0) != policyServerUID || example.Spec.Template.Spec.Affinity != nil {
		t.Errorf("kw-example pod %+v", example.Spec.Template.Spec)
	}

	// metricsPort is the metrics Service's port; the pods keep theirs.
	svc := &corev1.Service{}
	eventually(t, "metrics Service port 8080", func() bool {
		if c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: serverObjectName("kw-full")}, svc) != nil {
			return false
		}
		for _, p := range svc.Spec.Ports {
			if p.Name == "metrics" {
				return p.Port == 8080 && p.TargetPort.IntValue() == MetricsPort
			}
		}
		return false
	})

	// The PodDisruptionBudget follows minAvailable, then maxUnavailable, then goes.
	pdbKey := client.ObjectKey{Namespace: testNamespace, Name: serverObjectName("kw-full")}
	pdb := &policyv1.PodDisruptionBudget{}
	eventually(t, "PodDisruptionBudget minAvailable 50%", func() bool {
		return c.Get(ctx, pdbKey, pdb) == nil && pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.String() == "50%" && pdb.Spec.MaxUnavailable == nil
	})
	if sel := pdb.Spec.Selector.MatchLabels; sel[AppNameLabel] != AppName || sel[kubewardenv1.PolicyServerLabel] != "kw-full" {
		t.Errorf("PodDisruptionBudget selects %v, want the replicas", sel)
	}
	ps := &kubewardenv1.PolicyServer{}
	if err := c.Get(ctx, client.ObjectKey{Name: "kw-full"}, ps); err != nil {
		t.Fatal(err)
	}
	update(t, c, ps, func() { ps.Spec.MinAvailable, ps.Spec.MaxUnavailable = nil, ptr.To(intstr.FromInt32(1)) })
	eventually(t, "PodDisruptionBudget maxUnavailable 1", func() bool {
		return c.Get(ctx, pdbKey, pdb) == nil && pdb.Spec.MaxUnavailable != nil && pdb.Spec.MaxUnavailable.IntValue() == 1 && pdb.Spec.MinAvailable == nil
	})
	update(t, c, ps, func() { ps.Spec.MaxUnavailable = nil })
	eventually(t, "PodDisruptionBudget deleted", func() bool { return apierrors.IsNotFound(c.Get(ctx, pdbKey, pdb)) })
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: serverObjectName("kw-example")}, pdb); !apierrors.IsNotFound(err) {
		t.Errorf("kw-example sets neither minAvailable nor maxUnavailable but has a PodDisruptionBudget (%v)", err)
	}
}

// TestPolicyServer_KubewardenSpec_UnhonouredFieldsAreRefusedWithTheReason: a Kubewarden field
// Regent cannot honour is refused at apply time, naming the field and why, never pruned.
func TestPolicyServer_KubewardenSpec_UnhonouredFieldsAreRefusedWithTheReason(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c, err := client.New(hub.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for i, tc := range []struct {
		field string
		spec  map[string]any
		says  string
	}{
		{"insecureSources", map[string]any{"insecureSources": []any{"registry.local:5000"}}, "no per-registry exception"},
		{"sourceAuthorities", map[string]any{"sourceAuthorities": map[string]any{"registry.local": []any{"PEM"}}}, "one registry only"},
		{"namespacedPoliciesCapabilities", map[string]any{"namespacedPoliciesCapabilities": []any{"oci/*"}}, "host capabilities"},
		{"webhookPort", map[string]any{"webhookPort": int64(9443)}, "port 8443 only"},
		{"readinessProbePort", map[string]any{"readinessProbePort": int64(8081)}, "admission port 8443"},
		{"minAvailable", map[string]any{"minAvailable": int64(1), "maxUnavailable": "50%"}, "exclusive"},
	} {
		spec := map[string]any{"image": "ghcr.io/kubewarden/policy-server:latest", "replicas": int64(1)}
		for k, v := range tc.spec {
			spec[k] = v
		}
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "policies.kubewarden.io/v1", "kind": "PolicyServer",
			"metadata": map[string]any{"name": "refused-" + strings.ToLower(tc.field) + "-" + string(rune('a'+i))},
			"spec":     spec,
		}}
		err := c.Create(ctx, u)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.field) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: %v; want Invalid naming the field and saying %q", tc.field, err, tc.says)
		}
	}
	// The values Regent does serve are accepted: Kubewarden's defaults chart may render them.
	ok := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policies.kubewarden.io/v1", "kind": "PolicyServer",
		"metadata": map[string]any{"name": "accepted-ports"},
		"spec": map[string]any{"image": "ghcr.io/kubewarden/policy-server:latest", "replicas": int64(1),
			"webhookPort": int64(ServicePort), "readinessProbePort": int64(ServicePort), "verificationConfig": "verification", "sigstoreTrustConfig": "private-sigstore", "insecureSources": []any{}},
	}}
	if err := c.Create(ctx, ok); err != nil {
		t.Errorf("Regent's own ports, empty fields and a sigstoreTrustConfig: %v", err)
	}
}
