package admissionpolicy

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
)

// A PolicyServer's pods get bounded resources (the PolicyServer's, or defaults), metrics on a
// port of their own, and a NetworkPolicy owned by the PolicyServer that admits the admission
// port from anywhere (the apiserver's address cannot be known), the metrics port from the
// cluster's pods only, and nothing else.
func TestPolicyServer_ResourcesMetricsPortAndNetworkPolicy(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config, func(o *Options) { o.WebhookURL, o.CABundle = nil, nil })
	ctx := context.Background()
	get := func(obj client.Object, name string) bool {
		return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: name}, obj) == nil
	}
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "defaults"},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 1}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}

	sts := &appsv1.StatefulSet{}
	eventually(t, "StatefulSet", func() bool { return get(sts, "regent-policy-server-defaults") })
	ctr := sts.Spec.Template.Spec.Containers[0]
	for name, want := range map[string]corev1.ResourceList{"requests": ctr.Resources.Requests, "limits": ctr.Resources.Limits} {
		if want.Cpu().IsZero() || want.Memory().IsZero() {
			t.Errorf("container %s = %v: cpu and memory must both be bounded by default", name, want)
		}
	}
	var metricsPort bool
	for _, p := range ctr.Ports {
		metricsPort = metricsPort || (p.Name == "metrics" && p.ContainerPort == MetricsPort && p.ContainerPort != ServicePort)
	}
	if !metricsPort {
		t.Errorf("container ports %v: no metrics port apart from the admission port", ctr.Ports)
	}
	svc := &corev1.Service{}
	eventually(t, "Service", func() bool { return get(svc, "regent-policy-server-defaults") })
	if len(svc.Spec.Ports) != 2 || svc.Spec.Ports[1].Name != "metrics" {
		t.Errorf("Service ports = %v, want https and metrics", svc.Spec.Ports)
	}

	np := &networkingv1.NetworkPolicy{}
	eventually(t, "NetworkPolicy", func() bool { return get(np, "regent-policy-server-defaults") })
	if owner := metav1.GetControllerOf(np); owner == nil || owner.Kind != "PolicyServer" || owner.Name != "defaults" {
		t.Errorf("NetworkPolicy owner = %+v, want the PolicyServer", owner)
	}
	if np.Spec.PodSelector.MatchLabels[kubewardenv1.PolicyServerLabel] != "defaults" ||
		len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
		t.Errorf("NetworkPolicy selects %v with types %v", np.Spec.PodSelector, np.Spec.PolicyTypes)
	}
	ports := map[int32][]networkingv1.NetworkPolicyPeer{}
	for _, rule := range np.Spec.Ingress {
		if len(rule.Ports) != 1 || rule.Ports[0].Port == nil {
			t.Fatalf("ingress rule %+v does not name exactly one port", rule)
		}
		ports[rule.Ports[0].Port.IntVal] = rule.From
	}
	if len(ports) != 2 {
		t.Fatalf("ingress ports = %v, want the admission and metrics ports only", ports)
	}
	if from, ok := ports[ServicePort]; !ok || len(from) != 0 {
		t.Errorf("admission port peers = %v, want every source", from)
	}
	if from := ports[MetricsPort]; len(from) != 1 || from[0].NamespaceSelector == nil || from[0].IPBlock != nil {
		t.Errorf("metrics port peers = %+v, want the cluster's pods only", from)
	}

	// The PolicyServer's own values, Kubewarden's fields.
	update(t, c, ps, func() {
		ps.Spec.Requests = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("300Mi")}
		ps.Spec.Limits = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("600Mi"), corev1.ResourceCPU: resource.MustParse("1")}
	})
	eventually(t, "the PolicyServer's resources on the pod template", func() bool {
		if !get(sts, "regent-policy-server-defaults") {
			return false
		}
		r := sts.Spec.Template.Spec.Containers[0].Resources
		return r.Requests.Memory().Cmp(resource.MustParse("300Mi")) == 0 && r.Limits.Memory().Cmp(resource.MustParse("600Mi")) == 0 &&
			r.Limits.Cpu().Cmp(resource.MustParse("1")) == 0
	})
}
