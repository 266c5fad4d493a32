package admissionpolicy

import (
	"context"
	"fmt"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/eventnote"
	"regent.dev/regent/version"
)

// DefaultNamespace holds revisions, replica Leases and the policy servers' objects when
// Options.Namespace is empty.
const DefaultNamespace = "regent-system"

// Options configure the admission policy controllers; the zero value is production's.
type Options struct {
	// Namespace holds PolicyRevisions, Leases, the signing Secret and the policy servers'
	// StatefulSets, Services, ServiceAccounts and Roles; DefaultNamespace when empty.
	Namespace string
	// WebhookURL, when set and returning a non-empty base URL for a policy server (a local
	// fleet's process, "https://127.0.0.1:port"), makes webhooks call that URL instead of the
	// policy server's Service.
	WebhookURL func(policyServer string) string
	// CABundle returns the CA the apiserver trusts for a policy server's serving certificate;
	// when nil, the ca.crt of the serving Secret the controller issues.
	CABundle func(ctx context.Context, policyServer string) ([]byte, error)
	// ServingCAValidity and ServingCertValidity are the lifetimes of each policy server's
	// serving CA and certificate, renewed at 80% of their life (DefaultServingCAValidity and
	// DefaultServingCertValidity when zero); ServingHosts are names the certificate is valid
	// for besides the Service's (a local fleet's "127.0.0.1", which WebhookURL calls);
	// ServingCAPropagation is how long a new CA is in the webhooks' bundle before certificates it
	// signs are served (DefaultServingCAPropagation when zero).
	ServingCAValidity, ServingCertValidity, ServingCAPropagation time.Duration
	ServingHosts                                                 []string
	// Clock tells whether Leases are current and stamps conditions; the real clock when nil.
	Clock clock.PassiveClock
	// MaxConcurrentReconciles per controller; 2 when zero.
	MaxConcurrentReconciles int
	// PolicyServerImage is Regent's policy server image, which a PolicyServer naming Kubewarden's
	// policy-server image runs instead (servedImage); the image of this binary's version
	// (version.Image) when empty.
	PolicyServerImage string
}

// policyServerIndex indexes policies by the PolicyServer that serves them.
const policyServerIndex = "spec.policyServer"

// SetupWithManager adds the ClusterAdmissionPolicy, AdmissionPolicy and PolicyServer controllers
// to mgr. The manager's scheme must know policies.kubewarden.io/v1 (regent.dev/regent/api/scheme
// does). Objects in the controller's namespace are read through a cache of that namespace only,
// so the controller never caches the cluster's Secrets or Leases.
func SetupWithManager(mgr ctrl.Manager, opts Options) error {
	if opts.Namespace == "" {
		opts.Namespace = DefaultNamespace
	}
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.PolicyServerImage == "" {
		opts.PolicyServerImage = version.Image()
	}
	if opts.MaxConcurrentReconciles == 0 {
		opts.MaxConcurrentReconciles = 2
	}
	if opts.ServingCAValidity == 0 {
		opts.ServingCAValidity = DefaultServingCAValidity
	}
	if opts.ServingCertValidity == 0 {
		opts.ServingCertValidity = DefaultServingCertValidity
	}
	if opts.ServingCAPropagation == 0 {
		opts.ServingCAPropagation = DefaultServingCAPropagation
	}
	nsCache, err := cache.New(mgr.GetConfig(), cache.Options{
		Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultNamespaces: map[string]cache.Config{opts.Namespace: {}},
	})
	if err != nil {
		return fmt.Errorf("cache of namespace %s: %w", opts.Namespace, err)
	}
	if err := mgr.Add(nsCache); err != nil {
		return err
	}
	if opts.CABundle == nil {
		opts.CABundle = func(ctx context.Context, ps string) ([]byte, error) {
			return servingCA(ctx, nsCache, opts.Namespace, ps)
		}
	}
	for _, k := range []policyKind{clusterPolicyKind, namespacedPolicyKind, clusterGroupKind, namespacedGroupKind} {
		if err := setupPolicyController(mgr, nsCache, k, opts); err != nil {
			return err
		}
	}
	return setupPolicyServerController(mgr, nsCache, opts)
}

func setupPolicyController(mgr ctrl.Manager, nsCache cache.Cache, k policyKind, opts Options) error {
	name := "admissionpolicy-" + map[string]string{
		kubewardenv1.KindClusterAdmissionPolicy: "cluster", kubewardenv1.KindAdmissionPolicy: "namespaced",
		kubewardenv1.KindClusterAdmissionPolicyGroup: "group-cluster", kubewardenv1.KindAdmissionPolicyGroup: "group-namespaced"}[k.kind]
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), k.new(), policyServerIndex, func(o client.Object) []string {
		return []string{policyServerOf(o)}
	}); err != nil {
		return fmt.Errorf("index %s by policy server: %w", k.kind, err)
	}
	r := &policyReconciler{
		kind: k, client: mgr.GetClient(), reader: mgr.GetCache(),
		nsReader: nsCache, apiReader: mgr.GetAPIReader(), namespace: opts.Namespace, opts: opts, clock: opts.Clock,
		recorder: eventnote.Capped(mgr.GetEventRecorder(name)),
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named(name).
		For(k.new(), builder.WithPredicates(policyChanged)).
		WatchesRawSource(source.Kind[client.Object](nsCache, &kubewardenv1.PolicyRevision{},
			handler.EnqueueRequestsFromMapFunc(r.onRevision))).
		WatchesRawSource(source.Kind[client.Object](nsCache, &coordinationv1.Lease{},
			handler.EnqueueRequestsFromMapFunc(r.onLease), livenessChanged(opts.Clock))).
		WatchesMetadata(&admissionregistrationv1.ValidatingWebhookConfiguration{}, handler.EnqueueRequestsFromMapFunc(r.onWebhook)).
		WatchesMetadata(&admissionregistrationv1.MutatingWebhookConfiguration{}, handler.EnqueueRequestsFromMapFunc(r.onWebhook)).
		Watches(&kubewardenv1.PolicyServer{}, handler.EnqueueRequestsFromMapFunc(r.onPolicyServer)).
		// A rotated serving CA changes the bundle every webhook of the policy server carries.
		WatchesRawSource(source.Kind[client.Object](nsCache, &corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.onCABundle))).
		WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}).
		Complete(r)
	if err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	return nil
}

func setupPolicyServerController(mgr ctrl.Manager, nsCache cache.Cache, opts Options) error {
	const name = "admissionpolicy-policyserver"
	clusterCache, err := labelledClusterCache(mgr)
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	r := &policyServerReconciler{client: mgr.GetClient(), reader: mgr.GetCache(), nsReader: nsCache, clusterReader: clusterCache,
		mapper: mgr.GetRESTMapper(), namespace: opts.Namespace, clock: opts.Clock, recorder: eventnote.Capped(mgr.GetEventRecorder(name)),
		regentImage: opts.PolicyServerImage,
		rotation: servingRotation{kube: kube, reader: mgr.GetAPIReader(), caValidity: opts.ServingCAValidity,
			validity: opts.ServingCertValidity, propagation: opts.ServingCAPropagation, extraHosts: opts.ServingHosts}}
	b := ctrl.NewControllerManagedBy(mgr).Named(name).For(&kubewardenv1.PolicyServer{})
	owner := handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &kubewardenv1.PolicyServer{}, handler.OnlyControllerOwner())
	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &appsv1.Deployment{}, &corev1.Service{}, &corev1.PersistentVolumeClaim{}, &corev1.Secret{}, &networkingv1.NetworkPolicy{}, &policyv1.PodDisruptionBudget{}} {
		b = b.WatchesRawSource(source.Kind[client.Object](nsCache, obj, owner))
	}
	// Its pods, by label: a replica becoming Ready lets the next one with a stale cache volume
	// be replaced (replaceStalePods).
	b = b.WatchesRawSource(source.Kind[client.Object](nsCache, &corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(
		func(_ context.Context, o client.Object) []reconcile.Request {
			if ps := o.GetLabels()[kubewardenv1.PolicyServerLabel]; ps != "" && o.GetLabels()[AppNameLabel] == AppName {
				return []reconcile.Request{{NamespacedName: types.NamespacedName{Name: ps}}}
			}
			return nil
		})))
	// The verificationConfig ConfigMaps: an edit rolls the pods that read it.
	b = b.WatchesRawSource(source.Kind[client.Object](nsCache, &corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.onVerificationConfig)))
	b = r.watchRBACInputs(b, nsCache, clusterCache, owner)
	if err := b.WithOptions(controller.Options{MaxConcurrentReconciles: opts.MaxConcurrentReconciles}).Complete(r); err != nil {
		return fmt.Errorf("build %s: %w", name, err)
	}
	return nil
}

// policyChanged lets through what the controller acts on — a new generation, the rollback
// annotation, a deletion — and not its own status writes.
var policyChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
			e.ObjectOld.GetAnnotations()[kubewardenv1.RollbackAnnotation] != e.ObjectNew.GetAnnotations()[kubewardenv1.RollbackAnnotation] ||
			!e.ObjectNew.GetDeletionTimestamp().IsZero()
	},
}

// livenessChanged drops the renewals of a live replica's Lease, which arrive every few seconds
// per replica and change nothing; it keeps what can: a new or deleted Lease, a new holder or
// duration, or a renewal after the Lease had expired (the replica came back).
func livenessChanged(clk clock.PassiveClock) predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*coordinationv1.Lease)
		n, okNew := e.ObjectNew.(*coordinationv1.Lease)
		if !okOld || !okNew {
			return true
		}
		if !equality.Semantic.DeepEqual(o.Spec.HolderIdentity, n.Spec.HolderIdentity) ||
			!equality.Semantic.DeepEqual(o.Spec.LeaseDurationSeconds, n.Spec.LeaseDurationSeconds) {
			return true
		}
		return !leaseExpiry(*o).After(clk.Now())
	}}
}

// onRevision wakes the revision's policy when it is of this controller's kind.
func (r *policyReconciler) onRevision(_ context.Context, o client.Object) []reconcile.Request {
	rev, ok := o.(*kubewardenv1.PolicyRevision)
	if !ok || rev.Spec.ObjectReference.Kind != r.kind.kind {
		return nil
	}
	ref := rev.Spec.ObjectReference
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ref.Namespace, Name: ref.Name}}}
}

// onWebhook wakes the policy whose webhook configuration changed, to put back what it must be.
func (r *policyReconciler) onWebhook(_ context.Context, o client.Object) []reconcile.Request {
	kind, ns, name, ok := parsePolicyRef(o.GetAnnotations()[policyRefAnnotation])
	if !ok || kind != r.kind.kind {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
}

// onLease wakes the policies of the policy server whose replica Lease changed: a replica came,
// went, or renewed after a gap.
func (r *policyReconciler) onLease(ctx context.Context, o client.Object) []reconcile.Request {
	ps, ok := policyServerOfLease(o.GetName())
	if !ok {
		return nil
	}
	return r.policiesOf(ctx, ps)
}

// onPolicyServer wakes its policies: the kept count may have changed.
func (r *policyReconciler) onPolicyServer(ctx context.Context, o client.Object) []reconcile.Request {
	return r.policiesOf(ctx, o.GetName())
}

// onCABundle wakes the policies of the policy server whose CA bundle changed.
func (r *policyReconciler) onCABundle(ctx context.Context, o client.Object) []reconcile.Request {
	ps, ok := o.GetLabels()[kubewardenv1.PolicyServerLabel]
	if !ok || o.GetName() != caBundleName(ps) {
		return nil
	}
	return r.policiesOf(ctx, ps)
}

func (r *policyReconciler) policiesOf(ctx context.Context, ps string) []reconcile.Request {
	list, items := listOf(r.kind)
	if err := r.reader.List(ctx, list, client.MatchingFields{policyServerIndex: ps}); err != nil {
		return nil
	}
	var reqs []reconcile.Request
	for _, o := range items() {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)})
	}
	return reqs
}
