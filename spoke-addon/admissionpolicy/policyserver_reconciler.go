package admissionpolicy

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// Names of a policy server's objects in the controller namespace, after serverObjectName.
func caSecretName(ps string) string      { return serverObjectName(ps) + "-ca" }
func signingSecretName(ps string) string { return serverObjectName(ps) + "-signing" }
func servingSecretName(ps string) string { return serverObjectName(ps) + "-tls" }
func headlessName(ps string) string      { return serverObjectName(ps) + "-replicas" }
func cacheClaimName(ps string) string    { return serverObjectName(ps) + "-cache" }

// policyServerReconciler turns a PolicyServer into its StatefulSet, leader Deployment, Services,
// NetworkPolicies, PodDisruptionBudget, cache claim, Secrets, ServiceAccounts and RBAC, all owned by it so deleting it
// removes them.
type policyServerReconciler struct {
	client        client.Client
	reader        client.Reader // the manager's cache: policies, PolicyServers
	nsReader      client.Reader // the controller namespace's cache
	clusterReader client.Reader // the cache of the cluster-scoped objects labelled with a policy server
	mapper        meta.RESTMapper
	namespace     string
	clock         clock.PassiveClock
	recorder      events.EventRecorder
	rotation      servingRotation
	// regentImage replaces Kubewarden's policy-server image (servedImage).
	regentImage string
}

func (r *policyServerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ps := &kubewardenv1.PolicyServer{}
	if err := r.client.Get(ctx, req.NamespacedName, ps); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ps.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil // ownerReferences let the garbage collector remove the rest
	}
	// The identity first: a replica the StatefulSet starts must find its ServiceAccount and
	// the Lease names of a scale-up already granted.
	rbacCond, requeue, rbacErr := r.applyRBAC(ctx, ps)
	if rbacErr != nil {
		r.recorder.Eventf(ps, nil, corev1.EventTypeWarning, "RBACFailed", "Grant", "%s", rbacErr.Error())
	}
	cond := metav1.Condition{Type: "Deployed", Status: metav1.ConditionTrue, Reason: "ObjectsApplied",
		Message: fmt.Sprintf("StatefulSet %s/%s, leader Deployment %s, their Services, cache claim and Secrets are in place",
			r.namespace, serverObjectName(ps.Name), leaderWorkloadName(ps.Name))}
	image, substituted := servedImage(ps.Spec.Image, r.regentImage)
	imageCond := imageCondition(ps, image, substituted)
	if substituted && !meta.IsStatusConditionTrue(ps.Status.Conditions, conditionImageSubstituted) {
		r.recorder.Eventf(ps, nil, corev1.EventTypeNormal, reasonKubewardenImage, "Deploy", "%s", imageCond.Message)
	}
	// The workloads are rendered from a copy that names the image the pods run; ps itself, the
	// user's object, keeps spec.image as written.
	workload := ps
	if substituted {
		workload = ps.DeepCopy()
		workload.Spec.Image = image
	}
	err := r.apply(ctx, workload)
	if err == nil {
		var renew time.Duration
		if renew, err = r.rotation.rotate(ctx, ps, r.namespace); err == nil && (requeue == 0 || renew < requeue) {
			requeue = renew
		}
	}
	if err != nil {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "ApplyFailed", err.Error()
		r.recorder.Eventf(ps, nil, corev1.EventTypeWarning, "ApplyFailed", "Deploy", "%s", err.Error())
	}
	err = errors.Join(rbacErr, err)
	before := ps.Status.DeepCopy()
	for _, c := range []metav1.Condition{cond, rbacCond, r.leaderCondition(ctx, ps), imageCond} {
		c.ObservedGeneration = ps.Generation
		meta.SetStatusCondition(&ps.Status.Conditions, c)
	}
	if !equality.Semantic.DeepEqual(*before, ps.Status) {
		if werr := r.client.Status().Update(ctx, ps); werr != nil && err == nil {
			err = fmt.Errorf("write status: %w", werr)
		}
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

func (r *policyServerReconciler) apply(ctx context.Context, ps *kubewardenv1.PolicyServer) error {
	if err := r.applySecrets(ctx, ps); err != nil {
		return err
	}
	name := serverObjectName(ps.Name)
	selector := map[string]string{AppNameLabel: AppName, kubewardenv1.PolicyServerLabel: ps.Name}
	port := corev1.ServicePort{Name: "https", Port: ServicePort, TargetPort: intstr.FromInt32(ServicePort), Protocol: corev1.ProtocolTCP}
	metricsPort := corev1.ServicePort{Name: "metrics", Port: MetricsPort, TargetPort: intstr.FromInt32(MetricsPort), Protocol: corev1.ProtocolTCP}
	if ps.Spec.MetricsPort != nil {
		metricsPort.Port = *ps.Spec.MetricsPort // Kubewarden's metricsPort: the Service's, not the pods'
	}

	// The NetworkPolicy first, so no pod of the StatefulSet runs unprotected.
	if err := r.ensure(ctx, ps, &networkingv1.NetworkPolicy{ObjectMeta: r.meta(name, selector)}, func(o client.Object) {
		o.(*networkingv1.NetworkPolicy).Spec = networkPolicyOf(ps, selector)
	}); err != nil {
		return err
	}
	if err := r.ensure(ctx, ps, &corev1.Service{ObjectMeta: r.meta(name, selector)}, func(o client.Object) {
		s := o.(*corev1.Service)
		s.Spec.Selector, s.Spec.Ports = selector, []corev1.ServicePort{port, metricsPort}
	}); err != nil {
		return err
	}
	if err := r.ensure(ctx, ps, &corev1.Service{ObjectMeta: r.meta(headlessName(ps.Name), selector)}, func(o client.Object) {
		s := o.(*corev1.Service)
		s.Spec.Selector, s.Spec.Ports, s.Spec.ClusterIP = selector, []corev1.ServicePort{port}, corev1.ClusterIPNone
		// Replicas find each other before they are Ready: readiness is per policy, not per pod.
		s.Spec.PublishNotReadyAddresses = true
	}); err != nil {
		return err
	}
	if err := r.applyCacheClaim(ctx, ps, selector); err != nil {
		return err
	}
	verification, err := r.verificationVersion(ctx, ps)
	if err != nil {
		return err
	}
	claims := cacheClaimTemplates(ps, selector)
	if err := r.replaceForClaims(ctx, name, claims); err != nil {
		return err
	}
	if err := r.ensure(ctx, ps, &appsv1.StatefulSet{ObjectMeta: r.meta(name, workloadLabels(ps, selector))}, func(o client.Object) {
		s := o.(*appsv1.StatefulSet)
		replicas := ps.Spec.Replicas
		s.Spec.Replicas = &replicas
		s.Spec.ServiceName = headlessName(ps.Name)
		s.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
		s.Spec.Selector = &metav1.LabelSelector{MatchLabels: selector}
		s.Spec.Template = statefulSetPod(ps, r.namespace, selector)
		setVerificationVersion(&s.Spec.Template, verification)
		s.Spec.VolumeClaimTemplates = claims
	}); err != nil {
		return err
	}
	if err := r.applyLeaderWorkload(ctx, ps, selector, verification); err != nil {
		return err
	}
	if err := r.applyDisruptionBudget(ctx, ps, selector); err != nil {
		return err
	}
	return r.replaceStalePods(ctx, ps, selector)
}

// AppNameLabel = AppName marks every PolicyServer's pods and Services, whatever its name: what a
// monitor (deploy/monitoring) selects them by.
const (
	AppNameLabel = "app.kubernetes.io/name"
	AppName      = "regent-policy-server"
)

func (r *policyServerReconciler) meta(name string, labels map[string]string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: r.namespace, Labels: labels}
}

// ensure creates obj, after mutate, or updates the existing one when what mutate produces changed
// since the last write. What was written is remembered as a hash: the apiserver defaults fields
// (a pod template has many), so comparing with what it returns would rewrite on every pass.
// Reads go through the namespace's cache, or for a cluster-scoped object the cache of those
// labelled with a policy server; a create that races the cache fails and is retried.
func (r *policyServerReconciler) ensure(ctx context.Context, ps *kubewardenv1.PolicyServer, obj client.Object, mutate func(client.Object)) error {
	key := client.ObjectKeyFromObject(obj)
	desired := obj.DeepCopyObject().(client.Object)
	mutate(desired)
	hash := hashOf(desired)
	existing := obj.DeepCopyObject().(client.Object)
	reader := r.nsReader
	if key.Namespace == "" {
		reader = r.clusterReader
	}
	err := reader.Get(ctx, key, existing)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read %T %s: %w", obj, key.Name, err)
	}
	target := desired
	if err == nil {
		if existing.GetAnnotations()[hashAnnotation] == hash {
			return nil
		}
		target = existing
		mutate(target)
		target.SetLabels(obj.GetLabels())
	}
	annotations := target.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[hashAnnotation] = hash
	target.SetAnnotations(annotations)
	if err := controllerutil.SetControllerReference(ps, target, r.client.Scheme()); err != nil {
		return err
	}
	if target == desired {
		if err := r.client.Create(ctx, target); err != nil {
			return fmt.Errorf("create %T %s: %w", obj, key.Name, err)
		}
		return nil
	}
	if err := r.client.Update(ctx, target); err != nil {
		return fmt.Errorf("update %T %s: %w", obj, key.Name, err)
	}
	return nil
}
