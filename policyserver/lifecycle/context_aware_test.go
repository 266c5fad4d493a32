package lifecycle

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/internal/guests"
)

// testContextAware: a revision's contextAwareResources reach the replica's engine, whose host
// capabilities read the cluster through the replica's own apiserver configuration.
func testContextAware(t *testing.T, e *env) {
	const ps = "context"
	shared := e.policyServer(t, ps)
	r := e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1"})
	module, err := guests.Build("wapc-context")
	if err != nil {
		t.Fatal(err)
	}
	rev := e.createRevision(t, ps, "ctx", 1, kubewardenv1.PolicySpec{
		Module: writeFile(t, "context.wasm", module), ExecutionMode: "kubewarden-wapc",
		Settings:              &runtime.RawExtension{Raw: []byte(`{"namespaceLabel":"regent.dev/context-served"}`)},
		ContextAwareResources: []kubewardenv1.ContextAwareResource{{APIVersion: "v1", Kind: "Namespace"}},
	})
	e.waitRevision(t, rev.Name, "Ready on replica 0", readyOn(0, ReasonLoaded))
	if code, allowed := r.review(t, "/validate/clusterwide-ctx/1", "nginx:1.27"); code != http.StatusOK || allowed {
		t.Fatalf("namespace default lacks the label: got %d allowed=%v, want a denial", code, allowed)
	}
	fleettest.Edit(t, e.client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, func(ns *corev1.Namespace) {
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels["regent.dev/context-served"] = "yes"
	})
	t.Cleanup(func() {
		fleettest.Edit(t, e.client, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}}, func(ns *corev1.Namespace) {
			delete(ns.Labels, "regent.dev/context-served")
		})
	})
	fleettest.Eventually(t, 30*time.Second, func() (bool, string) { // once the replica's cached answer expires
		_, allowed := r.review(t, "/validate/clusterwide-ctx/1", "nginx:1.27")
		return allowed, "the labelled namespace's pods are still denied"
	})
}

func TestRevision_ContextAwareResources_OnlyForClusterAdmissionPolicies(t *testing.T) {
	spec := kubewardenv1.PolicySpec{Module: "x.wasm", ContextAwareResources: []kubewardenv1.ContextAwareResource{{APIVersion: "v1", Kind: "Namespace"}}}
	data, _ := json.Marshal(spec)
	for kind, want := range map[string]int{kubewardenv1.KindClusterAdmissionPolicy: 1, kubewardenv1.KindAdmissionPolicy: 0} {
		rev, err := decodeRevision(&kubewardenv1.PolicyRevision{Spec: kubewardenv1.PolicyRevisionSpec{
			ObjectReference: kubewardenv1.PolicyReference{Kind: kind, Name: "p", Namespace: "shop"}, PolicyGeneration: 1,
			Data: runtime.RawExtension{Raw: data}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := len(rev.policyConfig("x.wasm", "", "").ContextAwareResources); got != want {
			t.Errorf("%s: %d contextAwareResources reach the server, want %d", kind, got, want)
		}
	}
}
