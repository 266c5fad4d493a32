package propagator

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/templates"
)

// DefaultKeyRotation is how often a cluster's encryption key is replaced: OCM's default of 30 days.
const DefaultKeyRotation = 30 * 24 * time.Hour

// DisableRotationAnnotation "true" on a key Secret keeps its key, as in OCM.
const DisableRotationAnnotation = "policy.open-cluster-management.io/disable-rotation"

// rotationDue says whether a key Secret's key must be replaced now and, if not, in how long.
// As OCM: an unset or unreadable last-rotated annotation, or a key that is not an AES-256 key,
// means now; the annotation is how a user asks for a rotation (remove it).
func rotationDue(s *corev1.Secret, now time.Time, period time.Duration) (bool, time.Duration) {
	if s.Annotations[DisableRotationAnnotation] == "true" {
		return false, 0
	}
	if len(s.Data["key"]) != templates.KeySize {
		return true, 0
	}
	last, err := time.Parse(time.RFC3339, s.Annotations[templates.LastRotatedAnnotation])
	if err != nil {
		return true, 0
	}
	next := last.Add(period).Sub(now)
	if next <= 0 {
		return true, 0
	}
	return false, next
}

// keyRotator replaces the clusters' keys on schedule: the key becomes previousKey (with which the
// managed cluster still decrypts what is not yet re-encrypted), a new key is made, and the roots
// whose replicas in that cluster namespace carry encrypted values are propagated again, which
// re-encrypts them under the new key.
type keyRotator struct {
	client client.Client
	keys   client.Reader // a cache of the key Secrets only
	// replicasIn reads the hub's cached replicas in a cluster namespace.
	replicasIn func(ctx context.Context, namespace string) ([]client.Object, error)
	clock      clock.PassiveClock
	period     time.Duration
	roots      chan<- event.GenericEvent
}

func (k *keyRotator) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if req.Name != templates.EncryptionKeySecret {
		return ctrl.Result{}, nil
	}
	s := &corev1.Secret{}
	if err := k.keys.Get(ctx, req.NamespacedName, s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	rotate, after := rotationDue(s, k.clock.Now(), k.period)
	if !rotate {
		return ctrl.Result{RequeueAfter: after}, nil
	}
	key, err := templates.NewKey()
	if err != nil {
		return ctrl.Result{}, err
	}
	s = s.DeepCopy()
	if len(s.Data["key"]) == templates.KeySize {
		s.Data["previousKey"] = s.Data["key"]
	} else {
		// An invalid key decrypts nothing: it is not kept as the previous one.
		delete(s.Data, "previousKey")
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data["key"] = key
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[templates.LastRotatedAnnotation] = k.clock.Now().UTC().Format(time.RFC3339)
	if err := k.client.Update(ctx, s); err != nil {
		return ctrl.Result{}, fmt.Errorf("rotate the encryption key %s: %w", req.NamespacedName, err)
	}
	if err := k.reencrypt(ctx, req.Namespace); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: k.period}, nil
}

// reencrypt propagates again the roots whose replicas in cluster carry an IV.
func (k *keyRotator) reencrypt(ctx context.Context, cluster string) error {
	replicas, err := k.replicasIn(ctx, cluster)
	if err != nil {
		return fmt.Errorf("list the replicas of %s: %w", cluster, err)
	}
	for _, rep := range replicas {
		if _, ok := rep.GetAnnotations()[templates.IVAnnotation]; !ok {
			continue
		}
		ns, name, ok := rootOf(rep)
		if !ok {
			continue
		}
		root := &policyv1.Policy{}
		root.Namespace, root.Name = ns, name
		select {
		case k.roots <- event.GenericEvent{Object: root}:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}

// setupKeyRotation starts the key Secrets' own cache (the hub may list them by name only, so
// not through the manager's cache, where hub templates read other Secrets) and the rotator, whose
// re-encryptions reach the root controller through roots.
func (r *Reconciler) setupKeyRotation(mgr ctrl.Manager, rootController interface {
	Watch(source.TypedSource[ctrl.Request]) error
}) error {
	if r.KeyRotation < 0 {
		return nil
	}
	period := r.KeyRotation
	if period == 0 {
		period = DefaultKeyRotation
	}
	keys, err := cache.New(mgr.GetConfig(), cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {
			Field: fields.OneTermEqualSelector("metadata.name", templates.EncryptionKeySecret)}}})
	if err != nil {
		return fmt.Errorf("encryption key cache: %w", err)
	}
	if err := mgr.Add(keys); err != nil {
		return err
	}
	roots := make(chan event.GenericEvent)
	if err := rootController.Watch(source.Channel(roots, &handler.EnqueueRequestForObject{})); err != nil {
		return err
	}
	k := &keyRotator{client: r.Client, keys: keys, replicasIn: r.replicasIn, clock: r.clock(), period: period, roots: roots}
	return ctrl.NewControllerManagedBy(mgr).
		Named("encryption-key-rotation").
		// A process may build the hub's manager more than once (tests restart it in-process).
		WithOptions(controller.Options{SkipNameValidation: ptr.To(true)}).
		WatchesRawSource(source.Kind(keys, &corev1.Secret{}, &handler.TypedEnqueueRequestForObject[*corev1.Secret]{})).
		Complete(k)
}
