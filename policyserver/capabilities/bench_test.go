package capabilities

import (
	"context"
	"encoding/json"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/internal/guests"
)

// BenchmarkGetResourceEvaluation measures one evaluation of the wapc-context policy, whose
// guest looks up the pod's Namespace on a real kube-apiserver: answered from the host's cache,
// and with disable_cache (one GET per evaluation); and the cached host call alone.
func BenchmarkGetResourceEvaluation(b *testing.B) {
	hub := fleettest.Hub(b)
	kube := kubernetes.NewForConfigOrDie(hub.Config)
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop", Labels: map[string]string{"team": "a"}}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	host, err := New(Options{Kubernetes: hub.Config})
	if err != nil {
		b.Fatal(err)
	}
	cacheDir, err := guests.CacheDir("wazero")
	if err != nil {
		b.Fatal(err)
	}
	e, err := engine.New(context.Background(), engine.Options{CacheDir: cacheDir, Host: host})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.Close(context.Background()) })
	module, err := guests.Build("wapc-context")
	if err != nil {
		b.Fatal(err)
	}
	req, _ := json.Marshal(map[string]any{
		"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "operation": "CREATE", "namespace": "shop", "name": "p",
		"kind":   map[string]any{"group": "", "version": "v1", "kind": "Pod"},
		"object": map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "p", "namespace": "shop"}},
	})
	for _, tc := range []struct{ name, settings string }{
		{"cached", `{"namespaceLabel":"team"}`},
		{"disable_cache", `{"namespaceLabel":"team","disableCache":true}`},
	} {
		p, err := e.Load(context.Background(), engine.Spec{Name: tc.name, Module: module, Settings: json.RawMessage(tc.settings),
			ContextAwareResources: []engine.Resource{namespaces}})
		if err != nil {
			b.Fatal(err)
		}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				if r, err := p.Validate(context.Background(), req); err != nil || !r.Accepted {
					b.Fatal(r, err)
				}
			}
		})
		p.Close()
	}
	// The host's share of the cached case: the call without the guest around it.
	payload, _ := json.Marshal(map[string]any{"api_version": "v1", "kind": "Namespace", "name": "shop"})
	call := engine.HostCall{Allowed: []engine.Resource{namespaces}, Binding: "kubewarden", Namespace: "kubernetes", Operation: "get_resource", Payload: payload}
	b.Run("host_call_only/cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := host.Call(context.Background(), call); err != nil {
				b.Fatal(err)
			}
		}
	})
}
