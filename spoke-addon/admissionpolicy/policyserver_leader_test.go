package admissionpolicy

import (
	"context"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
)

// A PolicyServer gets a leader Deployment beside its StatefulSet: the same image and pod
// hardening, running `--role=leader` as the leader ServiceAccount (the only one that may read the
// signing key), never selected by the admission Service; the replicas run `--role=replica`. Its
// availability is the PolicyServer's LeaderReady condition, and while it is unavailable a new
// generation's Initialized condition says it waits for it.
func TestPolicyServer_LeaderDeployment_RunsAsTheLeaderIdentity_AndItsReadinessIsACondition(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()
	get := func(obj client.Object, name string) bool {
		return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: name}, obj) == nil
	}
	const name = "leaderwl"
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 2}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	sts, d := &appsv1.StatefulSet{}, &appsv1.Deployment{}
	eventually(t, "StatefulSet and leader Deployment", func() bool {
		return get(sts, serverObjectName(name)) && get(d, leaderWorkloadName(name))
	})

	if owner := metav1.GetControllerOf(d); owner == nil || owner.Kind != "PolicyServer" || owner.Name != name {
		t.Errorf("Deployment owner = %+v, want the PolicyServer", owner)
	}
	if d.Spec.Replicas == nil || *d.Spec.Replicas != 1 {
		t.Errorf("Deployment replicas = %v, want 1", d.Spec.Replicas)
	}
	lp, rp := d.Spec.Template.Spec, sts.Spec.Template.Spec
	if lp.ServiceAccountName != leaderIdentityName(name) || rp.ServiceAccountName != serviceAccountName(name) {
		t.Errorf("leader runs as %q, replicas as %q; want %q and %q", lp.ServiceAccountName, rp.ServiceAccountName,
			leaderIdentityName(name), serviceAccountName(name))
	}
	lc, rc := lp.Containers[0], rp.Containers[0]
	if !slices.Contains(lc.Args, "--role=leader") || slices.Contains(lc.Args, "--replica-from-hostname") {
		t.Errorf("leader args %v", lc.Args)
	}
	if !slices.Contains(rc.Args, "--role=replica") || !slices.Contains(rc.Args, "--replica-from-hostname") {
		t.Errorf("replica args %v", rc.Args)
	}
	// The same pod otherwise: image, hardening, probes, resources, volumes.
	if lc.Image != rc.Image || !equality.Semantic.DeepEqual(lc.SecurityContext, rc.SecurityContext) ||
		!equality.Semantic.DeepEqual(lp.SecurityContext, rp.SecurityContext) || !equality.Semantic.DeepEqual(lc.Resources, rc.Resources) ||
		lc.ReadinessProbe == nil || lc.LivenessProbe == nil || lc.StartupProbe == nil {
		t.Errorf("the leader's container differs from the replicas' beyond its role:\n%+v\n%+v", lc, rc)
	}
	if sc := lc.SecurityContext; sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("leader container security context %+v", sc)
	}
	// A leader pod never takes admission traffic, nor is it counted as a replica's pod.
	svc := &corev1.Service{}
	eventually(t, "Service", func() bool { return get(svc, serverObjectName(name)) })
	if labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the admission Service %v selects the leader pod %v", svc.Spec.Selector, d.Spec.Template.Labels)
	}
	if labels.SelectorFromSet(sts.Spec.Selector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the StatefulSet's selector matches the leader pod")
	}
	// Only the replicas reach it, on the port they fetch signed entries from.
	np := &networkingv1.NetworkPolicy{}
	eventually(t, "leader NetworkPolicy", func() bool { return get(np, leaderWorkloadName(name)) })
	if !labels.SelectorFromSet(np.Spec.PodSelector.MatchLabels).Matches(labels.Set(d.Spec.Template.Labels)) ||
		len(np.Spec.Ingress) != 2 || len(np.Spec.Ingress[0].From) != 1 ||
		!equality.Semantic.DeepEqual(np.Spec.Ingress[0].From[0].PodSelector.MatchLabels, sts.Spec.Selector.MatchLabels) {
		t.Errorf("leader NetworkPolicy %+v", np.Spec)
	}

	// No kubelet here: no pod is available, and the PolicyServer says so.
	waitLeaderReady(t, c, name, metav1.ConditionFalse, "LeaderUnavailable")
	p := clusterPolicy("waits-for-leader", name)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitForPolicy(t, c, p.Name, "Initialized saying it waits for the leader", func(q *kubewardenv1.ClusterAdmissionPolicy) bool {
		i := meta.FindStatusCondition(q.Status.Conditions, kubewardenv1.ConditionInitialized)
		return i != nil && i.Reason == "LeaderUnavailable" && strings.Contains(i.Message, leaderWorkloadName(name))
	})

	// Available, as the Deployment controller would report it.
	eventually(t, "Deployment status written", func() bool {
		if !get(d, leaderWorkloadName(name)) {
			return false
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, ReadyReplicas: 1, AvailableReplicas: 1, UpdatedReplicas: 1}
		return c.Status().Update(ctx, d) == nil
	})
	waitLeaderReady(t, c, name, metav1.ConditionTrue, "LeaderAvailable")
	waitForPolicy(t, c, p.Name, "Initialized pending on the leader, no longer unavailable", func(q *kubewardenv1.ClusterAdmissionPolicy) bool {
		i := meta.FindStatusCondition(q.Status.Conditions, kubewardenv1.ConditionInitialized)
		return i != nil && i.Reason == "Pending"
	})

	// Updated like the StatefulSet.
	update(t, c, ps, func() { ps.Spec.Image = "regent:next" })
	eventually(t, "the leader runs the new image", func() bool {
		return get(d, leaderWorkloadName(name)) && d.Spec.Template.Spec.Containers[0].Image == "regent:next"
	})
}

// waitLeaderReady polls the PolicyServer until its LeaderReady condition has status and reason.
func waitLeaderReady(t *testing.T, c client.Client, ps string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	eventually(t, "LeaderReady "+string(status)+" "+reason, func() bool {
		s := &kubewardenv1.PolicyServer{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: ps}, s); err != nil {
			return false
		}
		cond := meta.FindStatusCondition(s.Status.Conditions, conditionLeaderReady)
		return cond != nil && cond.Status == status && cond.Reason == reason && cond.Message != ""
	})
}
