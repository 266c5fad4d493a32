package propagator

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/rollout"
)

// DefaultStatusInterval is how long a rollout in progress may hold its clusters' answers and
// turns back from the root's status (Reconciler.StatusInterval), at least.
const DefaultStatusInterval = 5 * time.Second

// A status write costs the apiserver ~0.1 ms of CPU per line (~300 ms at 3,000 clusters,
// Session 21; ~480 ms beside 20 such roots, Session 27), so the interval grows with the lines of
// every root whose rollout progresses: at 10 ms a line, the hub's root status writes during
// rollouts take ~1% of an apiserver core, and a status lags its replicas by 10 ms per progressing
// line (30 s for one root of 3,000), up to a minute. At 3,000 clusters × 10 roots the turns then
// ran 1.15–1.32× the rollout ceiling's time instead of 1.51× at a flat 5 s (docs/benchmarks.md,
// Session 24); counting every root's lines rather than each root's own halved the status writes of
// 20 such roots (Session 27).
//
// Past 6,000 progressing lines the minute alone would let the share grow with the fleet: 50 roots
// of 3,000 clusters, each written once a minute, took ~a third of an apiserver core, and the
// simulated spokes beside them answered at half the rate they reached beside a plain client
// (Session 30). So the interval also grows by 2 ms a line (~5% of a core) up to maxStatusInterval:
// two minutes at 60,000 lines, five at 150,000, for rollouts that then take most of an hour.
const (
	statusIntervalPerLine = 10 * time.Millisecond
	usualStatusInterval   = time.Minute
	largeIntervalPerLine  = 2 * time.Millisecond
	maxStatusInterval     = 5 * time.Minute
)

// statusInterval is how long a progressing root may hold changes back when the roots whose
// rollouts progress have lines status lines in all, given the configured interval (0:
// DefaultStatusInterval; negative: never).
func statusInterval(configured time.Duration, lines int) time.Duration {
	switch {
	case configured < 0:
		return 0
	case configured == 0:
		configured = DefaultStatusInterval
	}
	n := time.Duration(lines)
	return max(configured, min(n*statusIntervalPerLine, usualStatusInterval), min(n*largeIntervalPerLine, maxStatusInterval))
}

// While a rollout progresses, every answer from a cluster and every turn changes lines of its
// root's status, and a root of 3,000 clusters costs the apiserver ~300 ms of CPU per status write
// however few lines change (docs/benchmarks.md, Session 21). Written before each turn's replica
// writes, that record was most of what a turn cost beyond the ceiling's (Sessions 22–23). So what
// a restarted hub recomputes from the replicas, stamped no earlier than it happened, waits up to
// an interval from the first of it and goes out with whatever comes next:
//   - an answer (a line's compliance, a cluster that succeeded), as a replica's report;
//   - a turn (ToApply to Progressing), as a replica that already enforces (rollout.Cluster.Active)
//     while the record says ToApply: the planner takes it for a turn given.
//
// Until it is written, a held step is seen against the record again by every reconcile and
// stamped anew, so a clock counting from it would run late by up to the interval: a success is
// held only without a soak time (minSuccessTime counts from it), a turn only without a progress
// deadline (it counts from the start). Failures, time-outs, the rollout's end and what users act
// on (the root's compliance, placement, every condition but the progress count) are written at
// once. The replicas carry everything held, so a crash loses none of it: the restarted hub stamps
// it later than it happened, never earlier.

// statusPace remembers since when each root has held changes back from its status.
type statusPace struct {
	mu    sync.Mutex
	since map[types.NamespacedName]time.Time
	// lines are the status lines of each root whose rollout progresses, total their sum.
	lines map[types.NamespacedName]int
	total int
}

// progress records the status lines of root, 0 when its rollout does not progress, and returns
// the interval of the progressing roots as they now are.
func (s *statusPace) progress(root types.NamespacedName, lines int, configured time.Duration) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total += lines - s.lines[root]
	if lines > 0 {
		if s.lines == nil {
			s.lines = map[types.NamespacedName]int{}
		}
		s.lines[root] = lines
	} else {
		delete(s.lines, root)
	}
	return statusInterval(configured, s.total)
}

// gone forgets a deleted root.
func (s *statusPace) gone(root types.NamespacedName) {
	s.progress(root, 0, 0)
	s.forget(root)
}

// wait is how long a root's holdable status change must still be held, zero when it is due.
// The first change held starts the interval: a group's answers, the turn they complete and the
// answers to that turn then go out in one write.
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

// holding says an answer the root's status will hold came at now (replica_answers.go): the
// interval counts from it when nothing was held before.
func (s *statusPace) holding(root types.NamespacedName, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.since[root]; ok {
		return
	}
	if s.since == nil {
		s.since = map[types.NamespacedName]time.Time{}
	}
	s.since[root] = now
}

// forget says the root's status was written (or the root is gone): nothing is held any more.
func (s *statusPace) forget(root types.NamespacedName) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.since, root)
}

// clocks are the recorded times a rollout counts from: a success's (soak, minSuccessTime) and a
// turn's (progressDeadline).
type clocks struct{ soak, deadline bool }

// clocksOf says which of a root's recorded times its rollout reads.
func clocksOf(root *policyv1.Policy) clocks {
	s, mode := strategyOf(root)
	return clocks{soak: rollout.MinSuccessTime(s, mode) > 0, deadline: mode == rollout.Progressive && rollout.HasDeadline(s)}
}

// holdable says whether after differs from before only by what may wait for the next write
// during a rollout that was and stays in progress: lines whose compliance or violations changed,
// lines that went forward without a clock counting from the step (ToApply to Progressing without
// a deadline, Progressing to Succeeded without a soak, or both), and the progress count in the
// Rollout condition's message.
func holdable(before, after *policyv1.PolicyStatus, c clocks) bool {
	if !progressing(before) || !progressing(after) || !sameClusters(before.Status, after.Status) {
		return false
	}
	if !equality.Semantic.DeepEqual(withoutProgress(before), withoutProgress(after)) {
		return false
	}
	for i, a := range after.Status {
		from, to := before.Status[i].RolloutStatus, a.RolloutStatus
		if from == to {
			continue
		}
		if from == policyv1.RolloutToApply {
			if c.deadline {
				return false
			}
			from = policyv1.RolloutProgressing
		}
		if from == to {
			continue
		}
		if c.soak || from != policyv1.RolloutProgressing || to != policyv1.RolloutSucceeded {
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
