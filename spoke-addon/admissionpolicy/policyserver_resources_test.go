package admissionpolicy

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

func TestPodResources_UserValuesWin_DefaultsFillTheRest_NeverALimitBelowARequest(t *testing.T) {
	q := resource.MustParse
	list := func(kv ...string) corev1.ResourceList {
		l := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			l[corev1.ResourceName(kv[i])] = q(kv[i+1])
		}
		return l
	}
	for _, tc := range []struct {
		name               string
		requests, limits   corev1.ResourceList
		wantReq, wantLimit corev1.ResourceList
	}{
		{"nothing set: every default", nil, nil,
			list("cpu", "250m", "memory", "256Mi"), list("cpu", "2", "memory", "1Gi")},
		{"a memory limit alone: it is also the request, cpu defaults", nil, list("memory", "512Mi"),
			list("cpu", "250m"), list("cpu", "2", "memory", "512Mi")},
		{"a request above the default limit: no default limit for it", list("memory", "4Gi"), nil,
			list("cpu", "250m", "memory", "4Gi"), list("cpu", "2")},
		{"a request below the default limit keeps the default limit", list("cpu", "1"), nil,
			list("cpu", "1", "memory", "256Mi"), list("cpu", "2", "memory", "1Gi")},
		{"both set: as given", list("cpu", "100m", "memory", "128Mi"), list("cpu", "500m", "memory", "256Mi"),
			list("cpu", "100m", "memory", "128Mi"), list("cpu", "500m", "memory", "256Mi")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ps := &kubewardenv1.PolicyServer{Spec: kubewardenv1.PolicyServerSpec{Requests: tc.requests, Limits: tc.limits}}
			got := podResources(ps)
			if !equalList(got.Requests, tc.wantReq) || !equalList(got.Limits, tc.wantLimit) {
				t.Errorf("requests %v limits %v, want %v / %v", got.Requests, got.Limits, tc.wantReq, tc.wantLimit)
			}
		})
	}
}

func equalList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}
