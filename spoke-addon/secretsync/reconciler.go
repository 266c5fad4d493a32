package secretsync

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"regent.dev/regent/templates"
)

// Reconciler copies the key Secret of Namespace from the hub to the managed cluster.
type Reconciler struct {
	// Hub is the addon's hub identity, which may read the key Secret by name only.
	Hub *rest.Config
	// Local writes the managed cluster; LocalReader reads it without a cache, so the addon never
	// lists every Secret of the cluster for one it names.
	Local       client.Client
	LocalReader client.Reader
	Namespace   string
	Recorder    record.EventRecorder

	hubSecrets corev1listers.SecretLister
}

// SetupWithManager watches the key Secret on the hub through an informer of its own, listing by
// name (the only list the hub identity is allowed) and built without asking the hub anything, so
// the addon starts while the hub is away.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	kube, err := kubernetes.NewForConfig(r.Hub)
	if err != nil {
		return err
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(r.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", templates.EncryptionKeySecret).String()
		}))
	inf := factory.Core().V1().Secrets()
	r.hubSecrets = inf.Lister()
	informer := inf.Informer()
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		factory.Start(ctx.Done())
		<-ctx.Done()
		factory.Shutdown()
		return nil
	})); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("regent-secretsync").
		WatchesRawSource(&source.Informer{Informer: informer, Handler: &handler.EnqueueRequestForObject{}}).
		Complete(r)
}

// Reconcile makes the managed cluster's key Secret hold the hub's data, or removes it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := client.ObjectKey{Namespace: r.Namespace, Name: templates.EncryptionKeySecret}
	if req.NamespacedName != key {
		return ctrl.Result{}, nil
	}
	src, err := r.hubSecrets.Secrets(key.Namespace).Get(key.Name)
	if apierrors.IsNotFound(err) {
		gone := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
		if err := r.Local.Delete(ctx, gone); err != nil && !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("delete the local copy of %s: %w", key, err)
		}
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read the hub's %s: %w", key, err)
	}
	dst := &corev1.Secret{}
	err = r.LocalReader.Get(ctx, key, dst)
	if apierrors.IsNotFound(err) {
		dst = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name},
			Type: corev1.SecretTypeOpaque, Data: maps.Clone(src.Data)}
		if err := r.Local.Create(ctx, dst); err != nil {
			return ctrl.Result{}, fmt.Errorf("create the local copy of %s: %w", key, err)
		}
		return ctrl.Result{}, nil
	}
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("read the local copy of %s: %w", key, err)
	}
	if maps.EqualFunc(dst.Data, src.Data, func(a, b []byte) bool { return string(a) == string(b) }) {
		return ctrl.Result{}, nil
	}
	dst.Data = maps.Clone(src.Data)
	if err := r.Local.Update(ctx, dst); err != nil {
		return ctrl.Result{}, fmt.Errorf("update the local copy of %s: %w", key, err)
	}
	if r.Recorder != nil {
		r.Recorder.Event(dst, corev1.EventTypeNormal, "EncryptionKeyUpdated", "the hub's policy encryption key for this cluster changed (rotated or replaced); the new key was copied")
	}
	return ctrl.Result{}, nil
}
