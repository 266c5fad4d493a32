package admissionpolicy

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// Defaults for a policy server container, per resource. Requests cover a replica serving a few
// dozen policies at rest (each loaded module and its warm instances take a few MB); the memory
// limit bounds what a replica can take from its node — the engine caps each instance's memory,
// the limit caps the sum — and the CPU limit keeps a replica spinning on guest code from
// starving its node's other workloads.
var (
	defaultRequests = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("250m"),
		corev1.ResourceMemory: resource.MustParse("256Mi"),
	}
	defaultLimits = corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("2"),
		corev1.ResourceMemory: resource.MustParse("1Gi"),
	}
)

// podResources are the container's requests and limits: the PolicyServer's, completed per
// resource with the defaults. A resource the user bounds either way keeps the user's
// intent: a limit alone is also its request (no default request above it), and a request
// alone gets the default limit only when that limit is not below it.
func podResources(ps *kubewardenv1.PolicyServer) corev1.ResourceRequirements {
	out := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for name, q := range ps.Spec.Requests {
		out.Requests[name] = q.DeepCopy()
	}
	for name, q := range ps.Spec.Limits {
		out.Limits[name] = q.DeepCopy()
	}
	for name, def := range defaultRequests {
		_, req := out.Requests[name]
		_, lim := out.Limits[name]
		if !req && !lim {
			out.Requests[name] = def.DeepCopy()
		}
	}
	for name, def := range defaultLimits {
		if _, lim := out.Limits[name]; lim {
			continue
		}
		if req, ok := out.Requests[name]; ok && req.Cmp(def) > 0 {
			continue // a limit below the request is refused by the apiserver
		}
		out.Limits[name] = def.DeepCopy()
	}
	return out
}
