package deploy

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"

	"regent.dev/regent/fleet/fleettest"
)

// deploy/hub/placement-api, added to deploy/hub in an overlay as docs/dashboard.md says, applies
// under restricted Pod Security, and the hub it runs serves HTTPS on :8443 (the Service's target)
// with the certificate from the Secret placement-webhook.yaml's Certificate writes.
func TestPlacementAPIComponent_ServesTheDashboardWithTheCertificatesSecret(t *testing.T) {
	hub := fleettest.Hub(t)
	k := newKubectl(t, hub)
	overlay := t.TempDir()
	base, err := filepath.Abs("hub")
	if err != nil {
		t.Fatal(err)
	}
	rel, err := filepath.Rel(overlay, base)
	if err != nil {
		t.Fatal(err)
	}
	kustomization := "resources: [" + rel + "]\ncomponents: [" + filepath.Join(rel, "placement-api") + "]\n"
	if err := os.WriteFile(filepath.Join(overlay, "kustomization.yaml"), []byte(kustomization), 0o644); err != nil {
		t.Fatal(err)
	}
	k.apply(t, "deploy/hub/namespace.yaml", "-f", "hub/namespace.yaml")
	if out := k.apply(t, "deploy/hub with placement-api", "-k", overlay); !strings.Contains(out, "deployment.apps/regent-hub") {
		t.Fatalf("applied no hub Deployment:\n%s", out)
	}
	assertPodsAdmitted(t, hub, "regent-system")

	d, err := kubernetes.NewForConfigOrDie(hub.Config).AppsV1().Deployments("regent-system").Get(context.Background(), "regent-hub", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	pod := d.Spec.Template.Spec
	args := pod.Containers[0].Args
	for _, want := range []string{"--placement-api-addr=:8443", "--leader-elect", "--health-probe-bind-address=:8081"} {
		if !slices.Contains(args, want) {
			t.Errorf("hub args %q lack %s (deploy/hub's own args must stay)", args, want)
		}
	}
	secretName := certificateSecret(t, "hub/placement-webhook.yaml")
	for _, flag := range []string{"--placement-api-cert-file=", "--placement-api-key-file="} {
		i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, flag) })
		if i < 0 {
			t.Errorf("hub args %q lack %s", args, flag)
			continue
		}
		file := strings.TrimPrefix(args[i], flag)
		mounted := false
		for _, m := range pod.Containers[0].VolumeMounts {
			for _, v := range pod.Volumes {
				if v.Name == m.Name && v.Secret != nil && v.Secret.SecretName == secretName && filepath.Dir(file) == m.MountPath {
					mounted = true
				}
			}
		}
		if !mounted {
			t.Errorf("%s%s is not in a mount of the Secret %s", flag, file, secretName)
		}
	}
	if !slices.ContainsFunc(pod.Containers[0].Ports, func(p corev1.ContainerPort) bool { return p.ContainerPort == 8443 }) {
		t.Errorf("the hub container declares no port 8443: %+v", pod.Containers[0].Ports)
	}
}

// certificateSecret is the secretName of the cert-manager Certificate in file.
func certificateSecret(t *testing.T, file string) string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		if u.GetKind() == "Certificate" {
			name, _, _ := unstructured.NestedString(u.Object, "spec", "secretName")
			return name
		}
	}
	t.Fatalf("%s holds no Certificate", file)
	return ""
}
