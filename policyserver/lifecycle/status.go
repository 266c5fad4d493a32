package lifecycle

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// statusWriter writes a revision's status from a fresh read, retrying on conflicts, so the
// leader and every replica can write the same revision without losing each other's conditions.
type statusWriter struct {
	client client.Client // reads the apiserver, not a cache: a conflict retry must see the latest
	clock  clock.PassiveClock
}

// update applies mutate to the latest revision and writes the status when mutate reports a
// change. A revision that is gone is not an error: nothing is left to report on.
func (w statusWriter) update(ctx context.Context, key client.ObjectKey, mutate func(*kubewardenv1.PolicyRevision, metav1.Time) bool) error {
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var rev kubewardenv1.PolicyRevision
		if err := w.client.Get(ctx, key, &rev); err != nil {
			return client.IgnoreNotFound(err)
		}
		var migrated bool
		rev.Status.Conditions, migrated = dropLegacyReady(rev.Status.Conditions)
		if !mutate(&rev, metav1.NewTime(w.clock.Now())) && !migrated {
			return nil
		}
		return client.IgnoreNotFound(w.client.Status().Update(ctx, &rev))
	})
	if err != nil {
		return fmt.Errorf("write status of revision %s: %w", key.Name, err)
	}
	return nil
}

// setConditions puts conditions into the revision's status.
func (w statusWriter) setConditions(ctx context.Context, key client.ObjectKey, conds ...kubewardenv1.PolicyCondition) error {
	return w.update(ctx, key, func(rev *kubewardenv1.PolicyRevision, now metav1.Time) bool {
		changed := false
		for _, c := range conds {
			var ch bool
			rev.Status.Conditions, ch = setCondition(rev.Status.Conditions, c, now)
			changed = changed || ch
		}
		return changed
	})
}

// setReplica puts this replica's report into the revision's status.
func (w statusWriter) setReplica(ctx context.Context, key client.ObjectKey, rs kubewardenv1.ReplicaStatus) error {
	return w.update(ctx, key, func(rev *kubewardenv1.PolicyRevision, now metav1.Time) bool {
		var changed bool
		rev.Status.Replicas, changed = setReplica(rev.Status.Replicas, rs, now)
		return changed
	})
}
