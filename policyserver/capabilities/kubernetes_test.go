package capabilities

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/engine"
)

var (
	namespaces = engine.Resource{APIVersion: "v1", Kind: "Namespace"}
	configMaps = engine.Resource{APIVersion: "v1", Kind: "ConfigMap"}
)

func kubeCall(t *testing.T, h *Host, operation string, allowed []engine.Resource, payload any) ([]byte, error) {
	t.Helper()
	b, err := json.Marshal(payload)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return h.Call(ctx, engine.HostCall{Policy: "clusterwide-ctx", Allowed: allowed,
		Binding: "kubewarden", Namespace: "kubernetes", Operation: operation, Payload: b})
}

func labelsOf(t *testing.T, raw []byte) map[string]string {
	t.Helper()
	var obj struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &obj); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return obj.Metadata.Labels
}

func itemNames(t *testing.T, raw []byte) []string {
	t.Helper()
	var list struct {
		Kind  string `json:"kind"`
		Items []struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		} `json:"items"`
	}
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	if !strings.HasSuffix(list.Kind, "List") {
		t.Fatalf("not a Kubernetes List: %s", raw)
	}
	var names []string
	for _, it := range list.Items {
		names = append(names, it.Metadata.Name)
	}
	return names
}

// TestKubernetes shares one real kube-apiserver between the specifications of the kubernetes
// capabilities.
func TestKubernetes(t *testing.T) {
	hub := fleettest.Hub(t)
	kube := kubernetes.NewForConfigOrDie(hub.Config)
	ctx := context.Background()
	for name, labels := range map[string]map[string]string{"labelled": {"team": "a"}, "plain": nil} {
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, cm := range []struct{ ns, name, quota string }{{"labelled", "quota", "set"}, {"labelled", "other", ""}, {"plain", "quota", "set"}} {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cm.name, Namespace: cm.ns}}
		if cm.quota != "" {
			obj.Labels = map[string]string{"regent.dev/quota": cm.quota}
		}
		if _, err := kube.CoreV1().ConfigMaps(cm.ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	clk := clocktesting.NewFakeClock(time.Now())
	h, err := New(Options{Kubernetes: hub.Config, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}

	t.Run("GetResource_AnswersTheObject_ClusterScopedOrNamespaced", func(t *testing.T) {
		raw, err := kubeCall(t, h, "get_resource", []engine.Resource{namespaces}, map[string]any{"api_version": "v1", "kind": "Namespace", "name": "labelled"})
		if err != nil {
			t.Fatal(err)
		}
		if labelsOf(t, raw)["team"] != "a" {
			t.Fatalf("want the namespace's labels, got %s", raw)
		}
		raw, err = kubeCall(t, h, "get_resource", []engine.Resource{configMaps}, map[string]any{"api_version": "v1", "kind": "ConfigMap", "name": "quota", "namespace": "plain"})
		if err != nil || labelsOf(t, raw)["regent.dev/quota"] != "set" {
			t.Fatalf("want plain/quota, got %s, %v", raw, err)
		}
	})
	t.Run("GetResource_OfAKindOutsideContextAwareResources_IsRefusedNamingIt", func(t *testing.T) {
		_, err := kubeCall(t, h, "get_resource", []engine.Resource{configMaps}, map[string]any{"api_version": "v1", "kind": "Namespace", "name": "labelled"})
		want := "policy clusterwide-ctx may not read v1 Namespace: the resource is not in the policy's contextAwareResources (it lists v1 ConfigMap)"
		if !errors.Is(err, ErrNotAllowed) || err.Error() != want {
			t.Fatalf("want %q, got %v", want, err)
		}
		_, err = kubeCall(t, h, "list_resources_all", nil, map[string]any{"api_version": "v1", "kind": "Secret"})
		if !errors.Is(err, ErrNotAllowed) || !strings.Contains(err.Error(), "(it lists none)") {
			t.Fatalf("a policy with no contextAwareResources: want a refusal, got %v", err)
		}
	})
	t.Run("GetResource_OfAMissingObject_SaysNotFound", func(t *testing.T) {
		_, err := kubeCall(t, h, "get_resource", []engine.Resource{namespaces}, map[string]any{"api_version": "v1", "kind": "Namespace", "name": "nope"})
		if err == nil || !strings.Contains(err.Error(), `get v1 Namespace nope: namespaces "nope" not found`) {
			t.Fatalf("want not found, got %v", err)
		}
	})
	t.Run("ListByNamespace_HonoursLabelAndFieldSelectors", func(t *testing.T) {
		raw, err := kubeCall(t, h, "list_resources_by_namespace", []engine.Resource{configMaps},
			map[string]any{"api_version": "v1", "kind": "ConfigMap", "namespace": "labelled", "label_selector": "regent.dev/quota=set"})
		if err != nil {
			t.Fatal(err)
		}
		if got := itemNames(t, raw); len(got) != 1 || got[0] != "quota" {
			t.Fatalf("label selector: want [quota], got %v", got)
		}
		raw, err = kubeCall(t, h, "list_resources_by_namespace", []engine.Resource{configMaps},
			map[string]any{"api_version": "v1", "kind": "ConfigMap", "namespace": "labelled", "field_selector": "metadata.name=other"})
		if err != nil {
			t.Fatal(err)
		}
		if got := itemNames(t, raw); len(got) != 1 || got[0] != "other" {
			t.Fatalf("field selector: want [other], got %v", got)
		}
	})
	t.Run("ListByNamespace_OfAClusterScopedKind_SaysToListAll", func(t *testing.T) {
		_, err := kubeCall(t, h, "list_resources_by_namespace", []engine.Resource{namespaces}, map[string]any{"api_version": "v1", "kind": "Namespace", "namespace": "plain"})
		if err == nil || !strings.Contains(err.Error(), "Namespace is cluster-scoped; use list_resources_all") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("ListAll_SpansNamespaces", func(t *testing.T) {
		raw, err := kubeCall(t, h, "list_resources_all", []engine.Resource{configMaps},
			map[string]any{"api_version": "v1", "kind": "ConfigMap", "label_selector": "regent.dev/quota=set"})
		if err != nil {
			t.Fatal(err)
		}
		if got := itemNames(t, raw); len(got) != 2 {
			t.Fatalf("want the quota ConfigMaps of both namespaces, got %v", got)
		}
	})
	t.Run("GetResource_ReusesAnAnswerForTheTTL_UnlessDisableCache", func(t *testing.T) {
		get := func(fresh bool) string {
			raw, err := kubeCall(t, h, "get_resource", []engine.Resource{namespaces},
				map[string]any{"api_version": "v1", "kind": "Namespace", "name": "plain", "disable_cache": fresh})
			if err != nil {
				t.Fatal(err)
			}
			return labelsOf(t, raw)["team"]
		}
		setTeam := func(team string) {
			fleettest.Edit(t, kubeClient(t, hub.Config), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "plain"}}, func(ns *corev1.Namespace) {
				ns.Labels = map[string]string{"team": team}
			})
		}
		if got := get(false); got != "" {
			t.Fatalf("before labelling: team %q", got)
		}
		setTeam("b")
		if got := get(false); got != "" {
			t.Fatalf("within the TTL the cached answer should be reused, got team %q", got)
		}
		if got := get(true); got != "b" {
			t.Fatalf("disable_cache: want the apiserver's team b, got %q", got)
		}
		setTeam("c")
		if got := get(false); got != "b" {
			t.Fatalf("disable_cache refreshes the cache: want b, got %q", got)
		}
		clk.Step(DefaultKubernetesTTL + time.Second)
		if got := get(false); got != "c" {
			t.Fatalf("after the TTL: want c, got %q", got)
		}
	})
	t.Run("CanI_AcceptsTheGoAndTheDocumentedPayloads", func(t *testing.T) {
		goSDK := map[string]any{"apiVersion": "authorization.k8s.io/v1", "kind": "SubjectAccessReview",
			"spec": map[string]any{"user": "alice", "resourceAttributes": map[string]any{"namespace": "plain", "verb": "create", "resource": "pods"}}}
		documented := map[string]any{"disable_cache": true, "subject_access_review": map[string]any{"user": "bob", "groups": []string{"system:masters"},
			"resource_attributes": map[string]any{"namespace": "plain", "verb": "create", "resource": "pods"}}}
		for _, tc := range []struct {
			name    string
			payload any
			allowed bool
		}{{"alice, no role", goSDK, false}, {"bob in system:masters", documented, true}} {
			raw, err := kubeCall(t, h, "can_i", nil, tc.payload)
			if err != nil {
				t.Fatalf("%s: %v", tc.name, err)
			}
			var status struct {
				Allowed bool `json:"allowed"`
			}
			if err := json.Unmarshal(raw, &status); err != nil || status.Allowed != tc.allowed {
				t.Fatalf("%s: want allowed=%v, got %s (%v)", tc.name, tc.allowed, raw, err)
			}
		}
	})
	t.Run("KindInstalledAfterTheFirstLookup_IsFoundOnceRediscovered", func(t *testing.T) {
		widgets := engine.Resource{APIVersion: "example.regent.dev/v1", Kind: "Widget"}
		payload := map[string]any{"api_version": widgets.APIVersion, "kind": widgets.Kind}
		if _, err := kubeCall(t, h, "list_resources_all", []engine.Resource{widgets}, payload); err == nil || !strings.Contains(err.Error(), "no matches for kind") {
			t.Fatalf("before the CRD: want no match, got %v", err)
		}
		installWidgetCRD(t, hub.Config)
		clk.Step(rediscoverAfter)
		fleettest.Eventually(t, 30*time.Second, func() (bool, string) {
			_, err := kubeCall(t, h, "list_resources_all", []engine.Resource{widgets}, payload)
			clk.Step(rediscoverAfter)
			return err == nil, "list widgets: " + errString(err)
		})
	})
}

func TestKubernetes_WithoutConfiguration_SaysSo(t *testing.T) {
	h, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubeCall(t, h, "get_resource", []engine.Resource{namespaces}, map[string]any{"api_version": "v1", "kind": "Namespace", "name": "x"})
	if !errors.Is(err, ErrNoKubernetes) || !strings.Contains(err.Error(), "--kubeconfig") {
		t.Fatalf("want an error naming the missing configuration, got %v", err)
	}
}

func TestKubernetes_UnreachableAPIServer_IsAnErrorNamingIt(t *testing.T) {
	h, err := New(Options{Kubernetes: &rest.Config{Host: "https://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = kubeCall(t, h, "get_resource", []engine.Resource{namespaces}, map[string]any{"api_version": "v1", "kind": "Namespace", "name": "x"})
	if err == nil || !strings.Contains(err.Error(), "resolve v1 Namespace") || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("want a resolve error with the connection failure, got %v", err)
	}
}

func installWidgetCRD(t *testing.T, cfg *rest.Config) {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.example.regent.dev"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "example.regent.dev", Scope: apiextensionsv1.NamespaceScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
					Type: "object", XPreserveUnknownFields: ptr.To(true)}}}},
		},
	}
	c := apiextensionsclient.NewForConfigOrDie(cfg)
	if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Create(context.Background(), crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func kubeClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
