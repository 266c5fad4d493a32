package deploy

import (
	"context"
	"os"
	"slices"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	addonapiv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/yaml"

	"regent.dev/regent/addonidentity"
	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/hub/addon"
	"regent.dev/regent/spoke-addon/admissionpolicy"
)

// The monitors in deploy/monitoring are Prometheus Operator objects (decoded strictly by its own
// types: a misspelt field fails) and each selects what really serves metrics under the port name
// it names: a monitor that selects nothing scrapes nothing, silently.
func TestMonitoring_EachMonitorSelectsWhatServesItsPort(t *testing.T) {
	hubService := &corev1.Service{}
	readYAML(t, "hub/service.yaml", hubService)
	hubSM := &monitoringv1.ServiceMonitor{}
	readYAML(t, "monitoring/hub-servicemonitor.yaml", hubSM)
	expectSelects(t, "hub ServiceMonitor", hubSM.Spec.Selector, hubService.Labels)
	expectServicePort(t, "hub ServiceMonitor", hubService.Spec.Ports, hubSM.Spec.Endpoints[0].Port)

	cluster := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "c1"}}
	mca := &addonapiv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addonidentity.AddonName, Namespace: "c1"}}
	objs, err := addon.AgentManifests(context.Background(), "", nil, cluster, mca)
	if err != nil {
		t.Fatal(err)
	}
	var agent *appsv1.Deployment
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			agent = d
		}
	}
	pm := &monitoringv1.PodMonitor{}
	readYAML(t, "monitoring/spoke-addon-podmonitor.yaml", pm)
	expectSelects(t, "spoke addon PodMonitor", pm.Spec.Selector, agent.Spec.Template.Labels)
	if pm.Namespace != agent.Namespace {
		t.Errorf("spoke addon PodMonitor in %q, the agent runs in %q", pm.Namespace, agent.Namespace)
	}
	var ports []string
	for _, c := range agent.Spec.Template.Spec.Containers {
		for _, p := range c.Ports {
			ports = append(ports, p.Name)
		}
	}
	if want := pm.Spec.PodMetricsEndpoints[0].Port; want == "" || !slices.Contains(ports, want) {
		t.Errorf("spoke addon PodMonitor scrapes port %v; the agent's container ports are %v", want, ports)
	}

	psSM := &monitoringv1.ServiceMonitor{}
	readYAML(t, "monitoring/policy-server-servicemonitor.yaml", psSM)
	expectSelects(t, "policy server ServiceMonitor", psSM.Spec.Selector,
		map[string]string{admissionpolicy.AppNameLabel: admissionpolicy.AppName, kubewardenv1.PolicyServerLabel: "default"})
	if !psSM.Spec.NamespaceSelector.Any {
		t.Error("policy server ServiceMonitor must look in every namespace: PolicyServers run where the addon is told")
	}
	if psSM.Spec.Endpoints[0].Port != "metrics" {
		t.Errorf("policy server ServiceMonitor scrapes %q, the PolicyServer Service's metrics port is named metrics", psSM.Spec.Endpoints[0].Port)
	}

	b, err := os.ReadFile("monitoring/kustomization.yaml")
	if err != nil {
		t.Fatal(err)
	}
	k := struct{ Resources []string }{}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	if len(k.Resources) != 3 {
		t.Errorf("deploy/monitoring/kustomization.yaml lists %v", k.Resources)
	}
}

func expectSelects(t *testing.T, what string, sel metav1.LabelSelector, target map[string]string) {
	t.Helper()
	s, err := metav1.LabelSelectorAsSelector(&sel)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if s.Empty() || !s.Matches(labels.Set(target)) {
		t.Errorf("%s selector %q does not select %v", what, s, target)
	}
}

func expectServicePort(t *testing.T, what string, ports []corev1.ServicePort, name string) {
	t.Helper()
	for _, p := range ports {
		if p.Name == name {
			return
		}
	}
	t.Errorf("%s scrapes port %q, which the Service does not have (%v)", what, name, ports)
}
