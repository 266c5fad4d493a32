package admissionpolicy

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
)

// A StatefulSet cannot swap a running pod's cache volume (the apiserver forbids changing a pod's
// volumes, and the StatefulSet controller retries that forever), so after a cache mode change the
// controller replaces such pods itself: only while every replica that already has the new volume
// is Ready, so the policy keeps an answering replica.
func TestPolicyServer_PodsWithTheOldCacheVolumeAreReplacedWhileTheOthersAreReady(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config, func(o *Options) { o.WebhookURL, o.CABundle = nil, nil })
	ctx := context.Background()
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "swap"}, Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 2}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	selector := map[string]string{AppNameLabel: AppName, kubewardenv1.PolicyServerLabel: ps.Name}
	pod := func(n string, cache corev1.VolumeSource, ready bool) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: serverObjectName(ps.Name) + "-" + n, Namespace: testNamespace, Labels: selector},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "policy-server", Image: "regent:dev"}},
				Volumes: []corev1.Volume{{Name: cacheVolume, VolumeSource: cache}}}}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		status := corev1.ConditionFalse
		if ready {
			status = corev1.ConditionTrue
		}
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}
		if err := c.Status().Update(ctx, p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	exists := func(p *corev1.Pod) bool {
		err := c.Get(ctx, client.ObjectKeyFromObject(p), &corev1.Pod{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
		return err == nil
	}
	// The mode changes first: pods made before it would be replaced in the old mode already
	// (replica 0's claim is stale there), which is not the case under test.
	update(t, c, ps, func() { ps.Spec.CacheStorageClassName = ptr.To("standard") })
	eventually(t, "StatefulSet with claim templates", func() bool {
		sts := &appsv1.StatefulSet{}
		return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: serverObjectName(ps.Name)}, sts) == nil &&
			len(sts.Spec.VolumeClaimTemplates) == 1
	})
	// Replica 0 already has its own claim but is not Ready yet; replica 1 still has the
	// emptyDir of the old mode and serves: it stays while replica 0 is not Ready.
	fresh := pod("0", corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: cacheVolume + "-" + serverObjectName(ps.Name) + "-0"}}, false)
	old := pod("1", corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, true)
	if !exists(old) {
		t.Fatal("the only serving replica was deleted while the replaced one was not Ready")
	}
	fresh.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}
	if err := c.Status().Update(ctx, fresh); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the pod with the old cache volume replaced", func() bool { return !exists(old) })
	if !exists(fresh) {
		t.Error("a pod that already has the new cache volume was deleted")
	}
}
