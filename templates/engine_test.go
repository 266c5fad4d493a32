package templates

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// objects is a Reader over fixed objects: the engine's text handling is the subject here; the
// reads against a real apiserver are tested by the controllers that use the engine.
type objects map[string]*unstructured.Unstructured

func (o objects) Get(_ context.Context, _, kind, namespace, name string) (*unstructured.Unstructured, error) {
	return o[kind+"/"+namespace+"/"+name], nil
}

func (o objects) List(context.Context, string, string, string, string) ([]unstructured.Unstructured, error) {
	return nil, nil
}

func configMap(ns, name string, data map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"namespace": ns, "name": name}, "data": data}}
}

func TestResolveJSON(t *testing.T) {
	r := objects{"ConfigMap/ns/cm": configMap("ns", "cm", map[string]any{"script": "a\nb\n", "n": "7", "flag": "true"})}
	cases := []struct{ name, in, want string }{
		{"autoindent", `{"data":{"script":"{{ fromConfigMap \"ns\" \"cm\" \"script\" | autoindent }}\n"}}`, `{"data":{"script":"a\nb\n"}}`},
		{"toInt", `{"spec":{"replicas":"{{ fromConfigMap \"ns\" \"cm\" \"n\" | toInt }}"}}`, `{"spec":{"replicas":7}}`},
		{"toBool", `{"spec":{"paused":"{{ fromConfigMap \"ns\" \"cm\" \"flag\" | toBool }}"}}`, `{"spec":{"paused":true}}`},
		{"copyConfigMapData", `{"data":"{{ copyConfigMapData \"ns\" \"cm\" }}"}`, `{"data":{"flag":"true","n":"7","script":"a\nb\n"}}`},
		// Past 80 columns: the action is not folded onto two lines, where its quotes were lost.
		{"long line", `{"spec":{"template":{"metadata":{"annotations":{"x":"{{ copyConfigMapData \"ns\" \"cm\" }}{{/* a comment long enough to pass eighty columns */}}"}}}}}`,
			`{"spec":{"template":{"metadata":{"annotations":{"x":{"flag":"true","n":"7","script":"a\nb\n"}}}}}}`},
		{"untouched hub text", `{"data":{"v":"{{hub .ManagedClusterName hub}}"}}`, ``},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ResolveJSON(context.Background(), []byte(tc.in), Config{Reader: r})
			if tc.want == "" {
				if err == nil {
					t.Fatalf("a hub template resolved on the spoke: %s", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestHubTemplatesReadOnlyTheRootNamespace(t *testing.T) {
	r := objects{"ConfigMap/root/cm": configMap("root", "cm", map[string]any{"k": "v"}),
		"ConfigMap/other/cm": configMap("other", "cm", map[string]any{"k": "v"})}
	cfg := Config{Hub: true, Reader: r, Namespace: "root", Data: map[string]any{"ManagedClusterName": "c1"}}
	got, err := ResolveText(context.Background(), `{{hub fromConfigMap "root" "cm" "k" hub}}-{{hub .ManagedClusterName hub}}-{{ spoke }}`, cfg)
	if err != nil || got != "v-c1-{{ spoke }}" {
		t.Fatalf("got %q, %v", got, err)
	}
	if _, err := ResolveText(context.Background(), `{{hub fromSecret "root" "s" "k" hub}}`, cfg); err == nil || !strings.Contains(err.Error(), "encrypt") {
		t.Errorf("a hub Secret value would reach a replica in clear: err = %v", err)
	}
	for _, text := range []string{`{{hub fromConfigMap "other" "cm" "k" hub}}`, `{{hub (lookup "v1" "Namespace" "" "root").metadata hub}}`} {
		if _, err := ResolveText(context.Background(), text, cfg); err == nil || !strings.Contains(err.Error(), "root") {
			t.Errorf("%s: err = %v, want a refusal naming the allowed namespace", text, err)
		}
	}
}

func TestHubTemplates_WithoutServiceAccountReadOnlyTheirOwnClusterScopedObjects(t *testing.T) {
	mc := func(name string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
			"metadata": map[string]any{"name": name}}}
	}
	r := objects{"ManagedCluster//c1": mc("c1"), "ManagedCluster//c2": mc("c2")}
	cfg := Config{Hub: true, Reader: r, Namespace: "root", Data: map[string]any{"ManagedClusterName": "c1"},
		ClusterScopedAllowList: []ClusterScopedObject{{Group: "cluster.open-cluster-management.io", Kind: "ManagedCluster", Name: "c1"}}}
	got, err := ResolveText(context.Background(), `{{hub (lookup "cluster.open-cluster-management.io/v1" "ManagedCluster" "" .ManagedClusterName).metadata.name hub}}`, cfg)
	if err != nil || got != "c1" {
		t.Fatalf("the cluster's own ManagedCluster: got %q, %v", got, err)
	}
	for _, text := range []string{
		`{{hub (lookup "cluster.open-cluster-management.io/v1" "ManagedCluster" "" "c2").metadata.name hub}}`,
		`{{hub (lookup "cluster.open-cluster-management.io/v1" "ManagedCluster" "" "").items hub}}`,
		`{{hub (lookup "example.com/v1" "ManagedCluster" "" "c1").metadata.name hub}}`,
	} {
		if _, err := ResolveText(context.Background(), text, cfg); err == nil || !strings.Contains(err.Error(), "serviceAccountName") {
			t.Errorf("%s: err = %v, want a refusal pointing at hubTemplateOptions.serviceAccountName", text, err)
		}
	}
	// With a service account (no namespace restriction) the Reader alone decides.
	cfg.Namespace, cfg.ClusterScopedAllowList = "", nil
	got, err = ResolveText(context.Background(), `{{hub (lookup "cluster.open-cluster-management.io/v1" "ManagedCluster" "" "c2").metadata.name hub}}`, cfg)
	if err != nil || got != "c2" {
		t.Errorf("with a service account: got %q, %v", got, err)
	}
}
