package policyserver

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/internal/guests"
	"regent.dev/regent/policyserver/selfsigned"
)

// TestWebhook_KubeAPIServerCallsThePolicyServer registers the policy server with a real
// kube-apiserver (URL client config, the server's CA) and creates pods through it: a privileged
// pod is rejected with the policy's message, a good one is admitted, a :latest one is rejected by
// the Rego policy, and the mutating policy's label is on the stored object.
func TestWebhook_KubeAPIServerCallsThePolicyServer(t *testing.T) {
	hub := fleettest.Hub(t)
	dir := testModules(t)
	policies := writeConfig(t, dir, `
privileged:
  module: wasi-privileged.wasm
  executionMode: wasi
latest:
  module: disallow-latest.rego
  executionMode: opa
default-team:
  module: wapc-labels.wasm
  mutating: true
  settings: {required: [team], defaults: {team: platform}}
`)
	certs, err := selfsigned.Write(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cacheDir, _ := guests.CacheDir("wazero")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, Options{Listener: ln, CertFile: certs.CertFile, KeyFile: certs.KeyFile,
			PoliciesFile: policies, ReloadInterval: -1, CacheDir: cacheDir})
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
	base := "https://" + ln.Addr().String()

	kube := kubernetes.NewForConfigOrDie(hub.Config)
	testNS := map[string]string{"regent.dev/webhook-test": "true"}
	hook := func(name, policy string) admissionregistrationv1.ValidatingWebhook {
		return admissionregistrationv1.ValidatingWebhook{
			Name:                    name + ".policies.regent.dev",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: ptr.To(base + "/validate/" + policy), CABundle: certs.CAPEM},
			Rules:                   podCreateRules(),
			FailurePolicy:           ptr.To(admissionregistrationv1.Fail),
			SideEffects:             ptr.To(admissionregistrationv1.SideEffectClassNone),
			AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector:       &metav1.LabelSelector{MatchLabels: testNS},
			TimeoutSeconds:          ptr.To[int32](10),
		}
	}
	_, err = kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Create(context.Background(),
		&admissionregistrationv1.ValidatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "regent-policies"},
			Webhooks:   []admissionregistrationv1.ValidatingWebhook{hook("privileged", "privileged"), hook("latest", "latest")},
		}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	m := hook("default-team", "default-team")
	_, err = kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(context.Background(),
		&admissionregistrationv1.MutatingWebhookConfiguration{
			ObjectMeta: metav1.ObjectMeta{Name: "regent-mutating-policies"},
			Webhooks: []admissionregistrationv1.MutatingWebhook{{
				Name: m.Name, ClientConfig: m.ClientConfig, Rules: m.Rules, FailurePolicy: m.FailurePolicy,
				SideEffects: m.SideEffects, AdmissionReviewVersions: m.AdmissionReviewVersions,
				NamespaceSelector: m.NamespaceSelector, TimeoutSeconds: m.TimeoutSeconds,
			}},
		}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns := "webhook-test"
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(),
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: testNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	pod := func(name, image string, privileged bool) *corev1.Pod {
		c := corev1.Container{Name: "main", Image: image}
		if privileged {
			c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}
	}
	create := func(p *corev1.Pod) (*corev1.Pod, error) {
		return kube.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	}

	// kube-apiserver picks up webhook configurations asynchronously; wait until it calls us.
	var rejection error
	waitFor(t, func() bool {
		_, rejection = create(pod(fmt.Sprintf("root-%d", time.Now().UnixNano()), "nginx:1.27", true))
		return rejection != nil && strings.Contains(rejection.Error(), "privileged.policies.regent.dev")
	})
	if !strings.Contains(rejection.Error(), `privileged container "main" is not allowed`) {
		t.Fatalf("privileged pod: want the policy's message, got %v", rejection)
	}

	_, err = create(pod("latest", "nginx:latest", false))
	if err == nil || !strings.Contains(err.Error(), "container main uses the :latest tag") {
		t.Fatalf(":latest pod: want the Rego policy's message, got %v", err)
	}

	created, err := create(pod("good", "nginx:1.27", false))
	if err != nil {
		t.Fatalf("good pod: %v", err)
	}
	if got := created.Labels["team"]; got != "platform" {
		t.Fatalf("the mutating policy's label is missing from the stored pod: labels %v", created.Labels)
	}
}

func podCreateRules() []admissionregistrationv1.RuleWithOperations {
	return []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"},
			Scope: ptr.To(admissionregistrationv1.NamespacedScope),
		},
	}}
}
