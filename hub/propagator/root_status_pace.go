package propagator

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// DefaultStatusInterval is how long a rollout in progress may hold its clusters' answers back
// from the root's status (Reconciler.StatusInterval).
const DefaultStatusInterval = 5 * time.Second

// While a rollout progresses, every answer from a cluster changes a line of its root's status,
// and a root of 3,000 clusters costs the apiserver ~300 ms of CPU per status write however few
// lines change (docs/benchmarks.md, Session 21): a turn of 100 clusters answering one by one
// would be as many writes. So the answers alone (a line's compliance, a cluster that succeeded)
// wait up to an interval from the first of them, and go with the turn they complete or with
// whatever else came in meanwhile. What the rollout must record before it acts (a cluster's
// turn, a failure, a time-out, the rollout's end) and what users act on (the root's compliance,
// placement, every condition but the progress count) is written at once: pacing never holds back
// a turn, and a line held back is recomputed from its replica after a restart, as any answer is.

// statusPace remembers since when each root has held answers back from its status.
type statusPace struct {
	mu    sync.Mutex
	since map[types.NamespacedName]time.Time
}

// wait is how long a root's answers-only status change must still be held, zero when it is due.
// The first answer held starts the interval: the answers of a group that come together then
// wait for each other, and for the turn they complete.
func (s *statusPace) wait(root types.NamespacedName, every time.Duration, now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	since, ok := s.since[root]
	if !ok {
		if s.since == nil {
			s.since = map[types.NamespacedName]time.Time{}
		}
		s.since[root] = now
		return every
	}
	return max(since.Add(every).Sub(now), 0)
}

// forget says the root's status was written (or the root is gone): nothing is held any more.
func (s *statusPace) forget(root types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.since, root)
}

// answersOnly says whether after differs from before only by clusters' answers during a rollout
// that was and stays in progress: lines whose compliance or violations changed, or (without a
// soak time, whose clock starts at the recorded success) that went from Progressing to
// Succeeded, and the progress count in the Rollout condition's message.
func answersOnly(before, after *policyv1.PolicyStatus, soak bool) bool {
	if !progressing(before) || !progressing(after) || !sameClusters(before.Status, after.Status) {
		return false
	}
	if !equality.Semantic.DeepEqual(withoutProgress(before), withoutProgress(after)) {
		return false
	}
	for i, a := range after.Status {
		b := before.Status[i]
		if b.RolloutStatus == a.RolloutStatus {
			continue
		}
		if soak || b.RolloutStatus != policyv1.RolloutProgressing || a.RolloutStatus != policyv1.RolloutSucceeded {
			return false
		}
	}
	return true
}

func progressing(s *policyv1.PolicyStatus) bool {
	for _, c := range s.Conditions {
		if c.Type == rolloutCondition {
			return c.Reason == "Progressing"
		}
	}
	return false
}

// withoutProgress is s without its lines and without the Rollout condition's message, which
// moves with the progress count alone.
func withoutProgress(s *policyv1.PolicyStatus) *policyv1.PolicyStatus {
	out := *s
	out.Status = nil
	out.Conditions = append(out.Conditions[:0:0], s.Conditions...)
	for i := range out.Conditions {
		if out.Conditions[i].Type == rolloutCondition {
			out.Conditions[i].Message = ""
		}
	}
	return &out
}
