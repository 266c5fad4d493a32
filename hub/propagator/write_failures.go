package propagator

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// replicasWrittenCondition says on a root whether every selected cluster's replica could be
// written. A root whose writes never failed has none: it appears with the first refusal and turns
// True once every write went through again.
const replicasWrittenCondition = "ReplicasWritten"

// Retries of refused replica writes: the first one soon, then as far apart as the writes have been
// failing (so the interval doubles), never further apart than writeRetryMax.
const (
	writeRetryMin = time.Second
	writeRetryMax = time.Minute
)

// writeRetries remembers, per root, since when its replica writes have been failing.
type writeRetries struct {
	mu    sync.Mutex
	since map[types.NamespacedName]time.Time
}

// next records a pass of root whose writes failed or not, and returns how soon to retry (zero when
// nothing failed).
func (w *writeRetries) next(root types.NamespacedName, failed bool, now time.Time) time.Duration {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !failed {
		delete(w.since, root)
		return 0
	}
	if w.since == nil {
		w.since = map[types.NamespacedName]time.Time{}
	}
	first, ok := w.since[root]
	if !ok {
		w.since[root] = now
		return writeRetryMin
	}
	return min(max(now.Sub(first), writeRetryMin), writeRetryMax)
}

func (w *writeRetries) forget(root types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.since, root)
}

// requeueAfter is when root must be reconciled again: when its rollout asks (recheck, nil when it
// does not), or sooner to retry failed writes. A retry never pushes the rollout's own time back.
func requeueAfter(recheck *time.Duration, retry time.Duration) time.Duration {
	switch {
	case recheck == nil:
		return retry
	case retry == 0:
		return *recheck
	}
	return min(*recheck, retry)
}

// stale says whether a write failed only because the hub's cache was behind the apiserver (an
// update with an old resourceVersion, a create of what already exists): the retry with fresh data
// succeeds, and it is nothing a user must hear about.
func stale(err error) bool {
	return apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err)
}

// reportWrites says on the root, in its ReplicasWritten condition and an Event, which clusters
// refused their replica writes and why; and that they all went through once they do again.
func (r *Reconciler) reportWrites(ctx context.Context, root *policyv1.Policy, selected int, out writeOutcome) error {
	failed := out.failed
	refused := map[string]error{}
	for cluster, err := range failed {
		log.FromContext(ctx).Error(err, "replica write failed", "cluster", cluster)
		if !stale(err) {
			refused[cluster] = err
		}
	}
	prev := meta.FindStatusCondition(root.Status.Conditions, replicasWrittenCondition)
	var c metav1.Condition
	switch {
	case len(refused) > 0:
		c = metav1.Condition{Type: replicasWrittenCondition, Status: metav1.ConditionFalse, ObservedGeneration: root.Generation,
			Reason: "WriteFailed", Message: refusalMessage(refused, selected) + heldMessage(out)}
	case prev == nil || prev.Status == metav1.ConditionTrue || len(failed) > 0:
		// Nothing refused; or only a stale cache, which says nothing about the refusals reported.
		return nil
	default:
		c = metav1.Condition{Type: replicasWrittenCondition, Status: metav1.ConditionTrue, ObservedGeneration: root.Generation,
			Reason: "Written", Message: "every selected cluster's replica is written"}
	}
	if prev != nil && prev.Status == c.Status && prev.Reason == c.Reason && prev.Message == c.Message &&
		prev.ObservedGeneration == c.ObservedGeneration {
		return nil
	}
	status := root.Status.DeepCopy()
	meta.SetStatusCondition(&status.Conditions, c)
	if c.Status == metav1.ConditionFalse {
		r.Recorder.Eventf(root, nil, "Warning", "ReplicaWriteFailed", "Propagate", "%s", c.Message)
	} else {
		r.Recorder.Eventf(root, nil, "Normal", "ReplicasWritten", "Propagate", "%s", c.Message)
	}
	return r.patchRootStatus(ctx, root, status)
}

// maxRefusalsNamed bounds how many clusters' errors a message spells out, and maxErrorLength each
// error, so that a fleet-wide refusal stays a readable condition.
const (
	maxRefusalsNamed = 10
	maxErrorLength   = 1024
)

func refusalMessage(refused map[string]error, selected int) string {
	clusters := make([]string, 0, len(refused))
	for cluster := range refused {
		clusters = append(clusters, cluster)
	}
	sort.Strings(clusters)
	var b strings.Builder
	noun := "clusters"
	if len(clusters) == 1 {
		noun = "cluster"
	}
	fmt.Fprintf(&b, "replica writes failed on %d %s (%d selected)", len(clusters), noun, selected)
	for i, cluster := range clusters {
		if i == maxRefusalsNamed {
			fmt.Fprintf(&b, "; and %d more", len(clusters)-maxRefusalsNamed)
			break
		}
		msg := refused[cluster].Error()
		if len(msg) > maxErrorLength {
			msg = msg[:maxErrorLength] + "…"
		}
		fmt.Fprintf(&b, "; %s: %s", cluster, msg)
	}
	return b.String()
}

// heldMessage says which clusters' enforcement waits for which to stop, so that a rollout that does
// not move explains itself.
func heldMessage(out writeOutcome) string {
	if len(out.held) == 0 {
		return ""
	}
	held, still := slices.Sorted(slices.Values(out.held)), slices.Sorted(slices.Values(out.stillEnforcing))
	return fmt.Sprintf(". Enforcement on %s waits until %s, still enforcing, takes its update", names(held), names(still))
}
