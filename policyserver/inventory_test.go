package policyserver

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/capabilities"
)

// Two policies share the Ingress informer; storage-class reads a cluster-scoped kind.
const inventoryPolicies = `
unique-host:
  module: uniqueingresshost.yaml
  executionMode: gatekeeper
  contextAwareResources: [{apiVersion: networking.k8s.io/v1, kind: Ingress}]
unique-host-too:
  module: uniqueingresshost.yaml
  executionMode: gatekeeper
  contextAwareResources: [{apiVersion: networking.k8s.io/v1, kind: Ingress}]
storage-class:
  module: storageclassexists.yaml
  executionMode: gatekeeper
  contextAwareResources: [{apiVersion: storage.k8s.io/v1, kind: StorageClass}]
`

// TestInventory serves Gatekeeper referential templates whose data.inventory the policy server
// replicates from a real kube-apiserver.
func TestInventory(t *testing.T) {
	hub := fleettest.Hub(t)
	kube := kubernetes.NewForConfigOrDie(hub.Config)
	ctx := context.Background()
	for _, ns := range []string{"team-a", "team-b"} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// In the cluster before the server starts: found by the informers' first list.
	if _, err := kube.NetworkingV1().Ingresses("team-b").Create(ctx, ingress("team-b", "shop-old", "shop.example.com"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for file, from := range map[string]string{"uniqueingresshost.yaml": "uniqueingresshost", "storageclassexists.yaml": "storageclassexists"} {
		b, err := os.ReadFile(filepath.Join("testdata", "gatekeeper", from, "template.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, file), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	host, err := capabilities.New(capabilities.Options{Kubernetes: hub.Config})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServerWith(t, dir, inventoryPolicies, Options{Host: host})

	review := func(t *testing.T, policy string, obj any, kind metav1.GroupVersionKind) (bool, string) {
		t.Helper()
		o, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		req, err := json.Marshal(map[string]any{
			"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "kind": kind, "operation": "CREATE",
			"namespace": "team-a", "name": "x", "object": json.RawMessage(o), "userInfo": map[string]any{"username": "alice"},
		})
		if err != nil {
			t.Fatal(err)
		}
		_, r, body := ts.post(t, "/validate/"+policy, req)
		if r == nil {
			t.Fatalf("no admission response: %s", body)
		}
		return r.Allowed, message(r)
	}
	ingressKind := metav1.GroupVersionKind{Group: "networking.k8s.io", Version: "v1", Kind: "Ingress"}
	newIngress := func(t *testing.T, policy, host string) (bool, string) {
		t.Helper()
		return review(t, policy, ingress("team-a", "new", host), ingressKind)
	}
	// eventually waits for the informers to bring a cluster change into the inventory.
	eventually := func(t *testing.T, policy, host string, allowed bool) {
		t.Helper()
		fleettest.Eventually(t, time.Minute, func() (bool, string) {
			ok, msg := newIngress(t, policy, host)
			return ok == allowed, "admission of " + host + " by " + policy + ": allowed=" + map[bool]string{true: "true", false: "false"}[ok] + " " + msg
		})
	}

	t.Run("ExistingHost_IsRefused_UniqueHost_IsAdmitted", func(t *testing.T) {
		for _, policy := range []string{"unique-host", "unique-host-too"} {
			ok, msg := newIngress(t, policy, "shop.example.com")
			if ok || !strings.Contains(msg, "host shop.example.com is already served by Ingress team-b/shop-old") {
				t.Errorf("%s: second Ingress for shop.example.com: allowed=%v %q", policy, ok, msg)
			}
			if ok, msg := newIngress(t, policy, "blog.example.com"); !ok {
				t.Errorf("%s: unique host refused: %q", policy, msg)
			}
		}
	})
	t.Run("IngressCreatedLater_JoinsTheInventory", func(t *testing.T) {
		if _, err := kube.NetworkingV1().Ingresses("team-b").Create(ctx, ingress("team-b", "blog-old", "blog.example.com"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "unique-host", "blog.example.com", false)
		eventually(t, "unique-host-too", "blog.example.com", false)
	})
	t.Run("IngressDeleted_LeavesTheInventory", func(t *testing.T) {
		if err := kube.NetworkingV1().Ingresses("team-b").Delete(ctx, "shop-old", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "unique-host", "shop.example.com", true)
		eventually(t, "unique-host-too", "shop.example.com", true)
	})
	t.Run("ClusterScopedKind", func(t *testing.T) {
		pvcKind := metav1.GroupVersionKind{Version: "v1", Kind: "PersistentVolumeClaim"}
		pvc := map[string]any{"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": map[string]any{"name": "data", "namespace": "team-a"},
			"spec": map[string]any{"storageClassName": "fast"}}
		if ok, msg := review(t, "storage-class", pvc, pvcKind); ok || !strings.Contains(msg, "storage class fast does not exist") {
			t.Fatalf("before the class exists: allowed=%v %q", ok, msg)
		}
		sc := &storagev1.StorageClass{ObjectMeta: metav1.ObjectMeta{Name: "fast"}, Provisioner: "example.com/ssd"}
		if _, err := kube.StorageV1().StorageClasses().Create(ctx, sc, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		fleettest.Eventually(t, time.Minute, func() (bool, string) {
			ok, msg := review(t, "storage-class", pvc, pvcKind)
			return ok, "PVC of class fast still refused: " + msg
		})
	})
	t.Run("UnloadingOnePolicy_KeepsTheSharedInformerFeedingTheOther", func(t *testing.T) {
		cfg, err := ReadConfig(writeConfig(t, dir, strings.Split(inventoryPolicies, "unique-host-too:")[0]))
		if err != nil {
			t.Fatal(err)
		}
		if err := ts.Apply(ctx, cfg); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.NetworkingV1().Ingresses("team-b").Create(ctx, ingress("team-b", "shop-again", "shop.example.com"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "unique-host", "shop.example.com", false)
	})
}

// A Gatekeeper policy that declares kinds to replicate is not served without a cluster to
// replicate them from: on an empty inventory it would admit what it exists to refuse.
func TestInventory_WithoutKubernetes_PolicyIsNotLoaded(t *testing.T) {
	dir := t.TempDir()
	b, err := os.ReadFile(filepath.Join("testdata", "gatekeeper", "uniqueingresshost", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "uniqueingresshost.yaml"), b, 0o644); err != nil {
		t.Fatal(err)
	}
	host, err := capabilities.New(capabilities.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServerWith(t, dir, "", Options{Host: host})
	cfg, err := ReadConfig(writeConfig(t, dir, strings.Split(inventoryPolicies, "unique-host-too:")[0]))
	if err != nil {
		t.Fatal(err)
	}
	err = ts.Apply(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "no Kubernetes access") {
		t.Fatalf("Apply: %v", err)
	}
	if len(ts.Loaded()) != 0 {
		t.Errorf("loaded %v", ts.Loaded())
	}
}

func ingress(ns, name, host string) *networkingv1.Ingress {
	prefix := networkingv1.PathTypePrefix
	return &networkingv1.Ingress{
		TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "Ingress"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: networkingv1.IngressSpec{Rules: []networkingv1.IngressRule{{Host: host, IngressRuleValue: networkingv1.IngressRuleValue{
			HTTP: &networkingv1.HTTPIngressRuleValue{Paths: []networkingv1.HTTPIngressPath{{Path: "/", PathType: &prefix,
				Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 80}}}}}},
		}}}},
	}
}
