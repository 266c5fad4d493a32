package secretsync

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"regent.dev/regent/templates"
)

// HubCacheOptions limits the hub cache's Secrets to the key Secret, the only one the addon's hub
// identity may read (by name, which the apiserver authorizes for a list or watch only with this
// field selector).
func HubCacheOptions() cache.ByObject {
	return cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", templates.EncryptionKeySecret)}
}

// Reconciler copies the key Secret of Namespace from the hub to the managed cluster.
type Reconciler struct {
	// Hub reads the hub's cluster namespace (its cache).
	Hub client.Reader
	// Local writes the managed cluster; LocalReader reads it without a cache, so the addon never
	// lists every Secret of the cluster for one it names.
	Local       client.Client
	LocalReader client.Reader
	Namespace   string
	Recorder    record.EventRecorder
}

// SetupWithManager watches the key Secret on the hub.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, hub cluster.Cluster) error {
	keyOnly := predicate.NewTypedPredicateFuncs(func(s *corev1.Secret) bool {
		return s.Name == templates.EncryptionKeySecret && s.Namespace == r.Namespace
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("regent-secretsync").
		WatchesRawSource(source.Kind(hub.GetCache(), &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{}, keyOnly)).
		Complete(r)
}

// Reconcile makes the managed cluster's key Secret hold the hub's data, or removes it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	key := client.ObjectKey{Namespace: r.Namespace, Name: templates.EncryptionKeySecret}
	if req.NamespacedName != key {
		return ctrl.Result{}, nil
	}
	src := &corev1.Secret{}
	err := r.Hub.Get(ctx, key, src)
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
