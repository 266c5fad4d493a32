package policyserver

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/capabilities"
)

// The wapc-context guest asks the host for the pod's Namespace (namespaceLabel) or the
// namespace's ConfigMaps (requireConfigMap); the three policies differ in what they may read.
const contextAwarePolicies = `
ns-team:
  module: wapc-context.wasm
  settings: {namespaceLabel: team}
  contextAwareResources: [{apiVersion: v1, kind: Namespace}]
ns-team-not-allowed:
  module: wapc-context.wasm
  settings: {namespaceLabel: team}
  contextAwareResources: [{apiVersion: v1, kind: ConfigMap}]
quota:
  module: wapc-context.wasm
  settings: {requireConfigMap: regent.dev/quota=set}
  contextAwareResources: [{apiVersion: v1, kind: ConfigMap}]
`

// TestContextAware shares one real kube-apiserver between the specifications of context-aware
// policies served by a policy server whose host capabilities read that apiserver.
func TestContextAware(t *testing.T) {
	hub := fleettest.Hub(t)
	kube := kubernetes.NewForConfigOrDie(hub.Config)
	ctx := context.Background()
	webhookNS := map[string]string{"regent.dev/context-aware-test": "true"}
	for name, team := range map[string]string{"team-a": "a", "no-team": ""} {
		labels := map[string]string{"regent.dev/context-aware-test": "true"}
		if team != "" {
			labels["team"] = team
		}
		if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for ns, quota := range map[string]string{"team-a": "set", "no-team": "other"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "quota", Namespace: ns, Labels: map[string]string{"regent.dev/quota": quota}}}
		if _, err := kube.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	host, err := capabilities.New(capabilities.Options{Kubernetes: hub.Config})
	if err != nil {
		t.Fatal(err)
	}
	ts := newTestServerWith(t, testModules(t), contextAwarePolicies, Options{Host: host})
	pod := func(ns string) []byte { return podRequest(t, ns, nil, container("c", "nginx:1.27", false)) }

	t.Run("NamespaceLookup_AdmitsPodsInLabelledNamespaces_DeniesOthers", func(t *testing.T) {
		if _, r, _ := ts.post(t, "/validate/ns-team", pod("team-a")); !r.Allowed {
			t.Fatalf("team-a carries team: want admission, got %s", message(r))
		}
		_, r, _ := ts.post(t, "/validate/ns-team", pod("no-team"))
		if r.Allowed || message(r) != "namespace no-team lacks the label team" {
			t.Fatalf("no-team: want the policy's denial, got allowed=%v %q", r.Allowed, message(r))
		}
	})
	t.Run("LookupOutsideContextAwareResources_IsDeniedWithTheHostsError", func(t *testing.T) {
		_, r, _ := ts.post(t, "/validate/ns-team-not-allowed", pod("team-a"))
		want := "cannot read namespace team-a: policy ns-team-not-allowed may not read v1 Namespace: " +
			"the resource is not in the policy's contextAwareResources (it lists v1 ConfigMap)"
		if r.Allowed || message(r) != want {
			t.Fatalf("want denial %q, got allowed=%v %q", want, r.Allowed, message(r))
		}
	})
	t.Run("ListLookup_HonoursTheLabelSelector", func(t *testing.T) {
		if _, r, _ := ts.post(t, "/validate/quota", pod("team-a")); !r.Allowed {
			t.Fatalf("team-a holds a quota ConfigMap: want admission, got %s", message(r))
		}
		_, r, _ := ts.post(t, "/validate/quota", pod("no-team"))
		if r.Allowed || message(r) != "namespace no-team has no ConfigMap matching regent.dev/quota=set" {
			t.Fatalf("no-team's ConfigMap does not match: want denial, got allowed=%v %q", r.Allowed, message(r))
		}
	})
	t.Run("HostCalls_AreCountedByCapabilityAndOutcome", func(t *testing.T) {
		metrics := ts.metricsText(t)
		for _, want := range []string{
			`regent_policyserver_host_calls_total{capability="kubewarden/kubernetes/get_resource",outcome="ok"}`,
			`regent_policyserver_host_calls_total{capability="kubewarden/kubernetes/get_resource",outcome="not_allowed"} 1`,
			`regent_policyserver_host_calls_total{capability="kubewarden/kubernetes/list_resources_by_namespace",outcome="ok"}`,
			`regent_policyserver_host_calls_total{capability="kubewarden/tracing/log",outcome="ok"}`,
		} {
			if !strings.Contains(metrics, want) {
				t.Errorf("/metrics lacks %s", want)
			}
		}
	})
	t.Run("KubeAPIServer_CallsThePolicy_AndRejectsPodsOfUnlabelledNamespaces", func(t *testing.T) {
		_, err := kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "regent-context-aware"},
			Webhooks: []admissionregistrationv1.ValidatingWebhook{{
				Name:                    "ns-team.policies.regent.dev",
				ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(ts.url + "/validate/ns-team"), CABundle: ts.caPEM},
				Rules:                   podCreateRules(),
				FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
				SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
				AdmissionReviewVersions: []string{"v1"},
				NamespaceSelector:       &metav1.LabelSelector{MatchLabels: webhookNS},
				TimeoutSeconds:          ptr.To[int32](10),
			}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		newPod := func(ns string) *corev1.Pod {
			return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%d", time.Now().UnixNano()), Namespace: ns},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "main", Image: "nginx:1.27"}}}}
		}
		var rejection error
		waitFor(t, func() bool { // the apiserver picks webhook configurations up asynchronously
			_, rejection = kube.CoreV1().Pods("no-team").Create(ctx, newPod("no-team"), metav1.CreateOptions{})
			return rejection != nil
		})
		if !strings.Contains(rejection.Error(), "namespace no-team lacks the label team") {
			t.Fatalf("want the policy's message, got %v", rejection)
		}
		if _, err := kube.CoreV1().Pods("team-a").Create(ctx, newPod("team-a"), metav1.CreateOptions{}); err != nil {
			t.Fatalf("a pod of team-a: %v", err)
		}
	})
	t.Run("AdmissionPolicy_MayNotListContextAwareResources", func(t *testing.T) {
		c, err := client.New(hub.Config, client.Options{Scheme: scheme.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		spec := kubewardenv1.PolicySpec{Module: "registry://example.com/p:v1", Rules: podCreateRules(),
			ContextAwareResources: []kubewardenv1.ContextAwareResource{{APIVersion: "v1", Kind: "Namespace"}}}
		err = c.Create(ctx, &kubewardenv1.AdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ctx", Namespace: "team-a"}, Spec: spec})
		if err == nil || !strings.Contains(err.Error(), "contextAwareResources is only allowed on a ClusterAdmissionPolicy") {
			t.Fatalf("want the CRD to refuse it, got %v", err)
		}
		cpol := &kubewardenv1.ClusterAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "ctx"}, Spec: kubewardenv1.ClusterAdmissionPolicySpec{PolicySpec: spec}}
		if err := c.Create(ctx, cpol); err != nil {
			t.Fatalf("a ClusterAdmissionPolicy may: %v", err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(cpol), cpol); err != nil || len(cpol.Spec.ContextAwareResources) != 1 {
			t.Fatalf("stored %+v (%v)", cpol.Spec.ContextAwareResources, err)
		}
	})
}
