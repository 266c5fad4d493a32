package admissionpolicy

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// MetricsPort serves a policy server's /metrics, in plain HTTP, apart from the admission port.
const MetricsPort = 9090

// networkPolicyOf admits to a policy server's pods only what they serve, each from the sources
// it must be reachable from; everything else (any other port a future build or a debug flag
// might open) is refused.
//
// The admission port is open to every source. The peer that must reach it is kube-apiserver,
// and no NetworkPolicy peer can name it in general: it runs outside the pod network on most
// distributions (host network, a managed control plane), its address is NATed or changes, and
// a podSelector or namespaceSelector never matches it. An ipBlock would have to be configured
// per cluster, and a wrong one denies every admission request, which with failurePolicy Fail
// denies the cluster's writes. The admission port serves only admission reviews and probes, over
// TLS; metrics moved off it for that reason.
//
// The metrics port is open to pods of any namespace (a namespaceSelector matching all), i.e. to
// an in-cluster Prometheus wherever it runs, and to nothing outside the pod network.
func networkPolicyOf(ps *kubewardenv1.PolicyServer, selector map[string]string) networkingv1.NetworkPolicySpec {
	tcp := corev1.ProtocolTCP
	admission, metrics := intstr.FromInt32(ServicePort), intstr.FromInt32(MetricsPort)
	return networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: selector},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{
			{Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &admission}}},
			{
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &metrics}},
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}},
			},
		},
	}
}
