package admissionpolicy

import (
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
)

func TestServedImage_KubewardensPolicyServerIsServedByRegentsOthersAsGiven(t *testing.T) {
	const regent = "registry.example/regent:v9.9.9"
	for _, tc := range []struct {
		spec string
		want string
	}{
		{"ghcr.io/kubewarden/policy-server:v1.20.0", regent},
		{"ghcr.io/kubewarden/policy-server:latest", regent},
		{"ghcr.io/kubewarden/policy-server@sha256:" + strings.Repeat("a", 64), regent},
		{"ghcr.io/kubewarden/policy-server", regent},
		{"kubewarden/policy-server:v1.20.0", regent},                               // Docker Hub
		{"mirror.corp.example:5000/ghcr/kubewarden/policy-server:v1.20.0", regent}, // a pull-through mirror
		{"registry.rancher.com/rancher/kubewarden-policy-server:v1.20.0", regent},  // Rancher's charts
		{"ghcr.io/regent-dev/regent:v0.1.0", "ghcr.io/regent-dev/regent:v0.1.0"},
		{"regent:dev", "regent:dev"},
		{"ghcr.io/kubewarden/kubewarden-controller:v1.20.0", "ghcr.io/kubewarden/kubewarden-controller:v1.20.0"},
		{"ghcr.io/example/policy-server:v1", "ghcr.io/example/policy-server:v1"},
		{"ghcr.io/kubewarden/policy-server-fork:v1", "ghcr.io/kubewarden/policy-server-fork:v1"},
		{"not a reference", "not a reference"},
	} {
		got, substituted := servedImage(tc.spec, regent)
		if got != tc.want || substituted != (tc.want != tc.spec) {
			t.Errorf("servedImage(%q) = %q, %v; want %q", tc.spec, got, substituted, tc.want)
		}
	}
}

// TestPolicyServer_KubewardenImage_PodsRunRegentsImageAndTheStatusSaysSo: a PolicyServer written
// for Kubewarden names Kubewarden's image; its replicas and leader run Regent's policy server image
// instead, spec.image stays as written, and a condition and an Event say what was substituted and
// why. Changing spec.image to any other image runs that image as given.
func TestPolicyServer_KubewardenImage_PodsRunRegentsImageAndTheStatusSaysSo(t *testing.T) {
	t.Parallel()
	const regentImage, kubewardenImage, customImage = "registry.example/regent:v9.9.9", "ghcr.io/kubewarden/policy-server:v1.20.0", "registry.example/regent-custom:v2"
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config, func(o *Options) { o.PolicyServerImage = regentImage })
	ctx := context.Background()
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "kw-image"},
		Spec: kubewardenv1.PolicyServerSpec{Image: kubewardenImage, Replicas: 1}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	podsRun := func(image string) {
		t.Helper()
		sts, leader := &appsv1.StatefulSet{}, &appsv1.Deployment{}
		eventually(t, "StatefulSet and leader Deployment of kw-image running "+image, func() bool {
			return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: serverObjectName(ps.Name)}, sts) == nil &&
				c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: leaderWorkloadName(ps.Name)}, leader) == nil &&
				sts.Spec.Template.Spec.Containers[0].Image == image && leader.Spec.Template.Spec.Containers[0].Image == image
		})
	}
	condition := func(status metav1.ConditionStatus, reason string) *metav1.Condition {
		t.Helper()
		var cond *metav1.Condition
		eventually(t, "condition "+conditionImageSubstituted+" "+string(status)+" "+reason, func() bool {
			if c.Get(ctx, client.ObjectKeyFromObject(ps), ps) != nil {
				return false
			}
			cond = meta.FindStatusCondition(ps.Status.Conditions, conditionImageSubstituted)
			return cond != nil && cond.Status == status && cond.Reason == reason && cond.ObservedGeneration == ps.Generation
		})
		return cond
	}

	podsRun(regentImage)
	cond := condition(metav1.ConditionTrue, reasonKubewardenImage)
	for _, want := range []string{kubewardenImage, regentImage, "Kubewarden's policy server"} {
		if !strings.Contains(cond.Message, want) {
			t.Errorf("condition message %q does not mention %q", cond.Message, want)
		}
	}
	if ps.Spec.Image != kubewardenImage {
		t.Errorf("spec.image %q, want it kept as written (%s)", ps.Spec.Image, kubewardenImage)
	}
	eventually(t, "event "+reasonKubewardenImage+" on kw-image naming both images", func() bool {
		list := &eventsv1.EventList{}
		if err := c.List(ctx, list); err != nil {
			return false
		}
		for _, e := range list.Items {
			if e.Regarding.Name == ps.Name && e.Regarding.Kind == "PolicyServer" && e.Reason == reasonKubewardenImage &&
				strings.Contains(e.Note, kubewardenImage) && strings.Contains(e.Note, regentImage) {
				return true
			}
		}
		return false
	})

	update(t, c, ps, func() { ps.Spec.Image = customImage })
	podsRun(customImage)
	if cond := condition(metav1.ConditionFalse, reasonImageAsGiven); !strings.Contains(cond.Message, customImage) {
		t.Errorf("condition message %q does not name the image run", cond.Message)
	}
	if c := meta.FindStatusCondition(ps.Status.Conditions, "Deployed"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("Deployed %+v, want True beside the image condition", c)
	}
}
