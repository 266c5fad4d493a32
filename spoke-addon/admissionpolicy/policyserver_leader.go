package admissionpolicy

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// The leader workload. A pod has one identity, and only the leader's ServiceAccount may read
// the signing key: so the StatefulSet's replicas (as the replica ServiceAccount) run
// `--role=replica` and never campaign, and a Deployment of its own runs `--role=leader` as the
// leader ServiceAccount. It pulls, precompiles, validates and signs each revision, serves the
// signed entries the replicas fetch, and runs the background scan; it serves no admission, so
// the Service and the NetworkPolicy of the replicas do not select it.
//
// One replica: the leader is off the admission path (replicas keep serving what they loaded
// while it is away, and only new generations wait for it), so a standby would double the
// memory of a compiling engine to shorten a pause in rollouts, not in admission. A rolling
// update starts the new pod before the old one stops; the Lease keeps them from leading at once,
// and the old pod releases it as it stops.

// conditionLeaderReady says whether the leader workload has a pod available.
const conditionLeaderReady = "LeaderReady"

// leaderWorkloadName names the Deployment; leaderAppName marks its pods apart from the replicas'.
func leaderWorkloadName(ps string) string { return serverObjectName(ps) + "-leader" }

const leaderAppName = AppName + "-leader"

func leaderSelector(ps string) map[string]string {
	return map[string]string{AppNameLabel: leaderAppName, kubewardenv1.PolicyServerLabel: ps}
}

// leaderPod is the replicas' pod (statefulSetPod: image, Pod Security "restricted" contexts,
// resources, probes, volumes and whatever scheduling the PolicyServer gives its pods) running
// `--role=leader` as the leader ServiceAccount. Its signed cache is the shared claim when the
// PolicyServer has one, an emptyDir otherwise: a Deployment has no claim per pod, and a new
// leader signs again what its cache lacks (republish).
func leaderPod(ps *kubewardenv1.PolicyServer, namespace string) corev1.PodTemplateSpec {
	pod := statefulSetPod(ps, namespace, leaderSelector(ps.Name))
	pod.Spec.ServiceAccountName = leaderIdentityName(ps.Name)
	// Ready while it runs, leading or on standby (lifecycle's leader handler serves /readyz).
	pod.Spec.Containers[0].Args = policyServerArgs(ps, namespace, "leader")
	if !sharedCache(ps) && ps.Spec.CacheStorageClassName != nil {
		pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: cacheVolume, VolumeSource: corev1.VolumeSource{
			EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(cacheSize.DeepCopy())}}})
	}
	return pod
}

// leaderNetworkPolicy admits to the leader pod only the replicas of its policy server, on the
// port they fetch signed entries from, and metrics as the replicas' policy does. Probes come
// from the node, which a NetworkPolicy never blocks.
func leaderNetworkPolicy(ps *kubewardenv1.PolicyServer, replicas map[string]string) networkingv1.NetworkPolicySpec {
	spec := networkPolicyOf(ps, leaderSelector(ps.Name))
	spec.Ingress[0].From = []networkingv1.NetworkPolicyPeer{{PodSelector: &metav1.LabelSelector{MatchLabels: replicas}}}
	return spec
}

// applyLeaderWorkload keeps the leader's NetworkPolicy and its Deployment as leaderPod renders
// it, owned by the PolicyServer.
func (r *policyServerReconciler) applyLeaderWorkload(ctx context.Context, ps *kubewardenv1.PolicyServer, replicas map[string]string, verification signatureInputs) error {
	selector := leaderSelector(ps.Name)
	if err := r.ensure(ctx, ps, &networkingv1.NetworkPolicy{ObjectMeta: r.meta(leaderWorkloadName(ps.Name), selector)}, func(o client.Object) {
		o.(*networkingv1.NetworkPolicy).Spec = leaderNetworkPolicy(ps, replicas)
	}); err != nil {
		return err
	}
	return r.ensure(ctx, ps, &appsv1.Deployment{ObjectMeta: r.meta(leaderWorkloadName(ps.Name), workloadLabels(ps, selector))}, func(o client.Object) {
		d := o.(*appsv1.Deployment)
		d.Spec.Replicas = ptr.To[int32](1)
		d.Spec.Selector = &metav1.LabelSelector{MatchLabels: selector}
		zero, one := intstr.FromInt32(0), intstr.FromInt32(1)
		d.Spec.Strategy = appsv1.DeploymentStrategy{Type: appsv1.RollingUpdateDeploymentStrategyType,
			RollingUpdate: &appsv1.RollingUpdateDeployment{MaxUnavailable: &zero, MaxSurge: &one}}
		d.Spec.Template = leaderPod(ps, r.namespace)
		setVerificationVersion(&d.Spec.Template, verification)
	})
}

// leaderCondition reads the leader Deployment's status: True while a pod of it is available. While it is not, the revisions already loaded keep serving and new ones wait.
func (r *policyServerReconciler) leaderCondition(ctx context.Context, ps *kubewardenv1.PolicyServer) metav1.Condition {
	name := leaderWorkloadName(ps.Name)
	cond := metav1.Condition{Type: conditionLeaderReady, Status: metav1.ConditionFalse, Reason: "LeaderUnavailable"}
	waiting := "; the replicas keep serving the generations they loaded, and new generations wait for the leader to prepare them"
	d := &appsv1.Deployment{}
	if err := r.nsReader.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: name}, d); err != nil {
		cond.Message = fmt.Sprintf("Deployment %s/%s: %v%s", r.namespace, name, err, waiting)
		return cond
	}
	// During a rolling update the old pod, available, leads until the new one is: still ready.
	if d.Status.AvailableReplicas < 1 {
		cond.Message = fmt.Sprintf("Deployment %s/%s has no available pod (it runs as ServiceAccount %s)%s",
			r.namespace, name, leaderIdentityName(ps.Name), waiting)
		for _, c := range d.Status.Conditions {
			if c.Status != corev1.ConditionTrue && c.Message != "" {
				cond.Message += "; " + string(c.Type) + ": " + c.Message
			}
		}
		return cond
	}
	cond.Status, cond.Reason = metav1.ConditionTrue, "LeaderAvailable"
	cond.Message = fmt.Sprintf("Deployment %s/%s runs the leader as ServiceAccount %s: it prepares, signs and serves the cache entries the replicas fetch",
		r.namespace, name, leaderIdentityName(ps.Name))
	return cond
}
