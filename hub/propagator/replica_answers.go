package propagator

import (
	"maps"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/rollout"
)

// A replica's answer (its cluster's compliance report: an update of its status alone) used to
// reconcile its root within replicaEventBatch, every time. At 60,000 replicas that was 6.7
// reconciles of a 3,000-cluster root per turn of a 100-cluster group, where only the group's last
// answer could move the rollout on (docs/benchmarks.md, Session 26). answerGate remembers what
// each root's last plan waits for and routes an answer by what it can change:
//   - the rollout: the last of the clusters in their turn succeeds (at once: nothing else is
//     coming), a failure, or any success under Progressive (a place under maxConcurrency);
//   - the root's compliance: an answer worse than the root's, or the last of the root's worst
//     improving;
//   - one line of the status: held until the root's status interval, which holds such a line
//     anyway while the rollout progresses (root_status_pace.go), and reconciled after the batch
//     otherwise;
//   - nothing the hub reads (the same result again): not reconciled at all.
//
// A root this process has not planned yet, and every event but an answer, is reconciled after the
// batch as before. A route never gives a turn: only a reconcile that reads the whole cache does.
// A route that is wrong (a record the cache moved past) can only make a step later, by at most
// the status interval; a restarted hub starts without records.
type answerGate struct {
	mu    sync.Mutex
	roots map[types.NamespacedName]*awaited
}

// awaited is what one root's last plan waits for.
type awaited struct {
	// turns are the clusters in their turn (Progressing) with no result yet, and the spec hash
	// their replica carries once it enforces; a result of another spec is not theirs.
	turns map[string]string
	// everySuccess: each success can start another cluster (Progressive, maxConcurrency).
	everySuccess bool
	// informs: the root only informs, so any result is a success (rollout.InformAsIs).
	informs bool
	// worst is the rank of the root's compliance, atWorst how many clusters are at that rank.
	worst, atWorst int
	// hold is how long a line-only answer may wait; replicaEventBatch or less means it does not.
	hold time.Duration
}

// answerRoute is what an answer sets off.
type answerRoute int

const (
	answerIgnored answerRoute = iota
	answerHeld
	answerBatched
	answerNow
)

var answerRouteNames = [...]string{answerIgnored: "ignored", answerHeld: "held", answerBatched: "batched", answerNow: "now"}

// route says what an answer (answerOnly) of a replica of root, from old to updated, sets off and
// after how long.
func (g *answerGate) route(root types.NamespacedName, old, updated *CachedReplica) (answerRoute, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w := g.roots[root]
	if w == nil {
		return answerBatched, replicaEventBatch
	}
	from, to := reportOf(old), reportOf(updated)
	if from == to {
		return answerIgnored, 0
	}
	out := answerHeld
	if want, ok := w.turns[updated.namespace]; ok && updated.specHash == want {
		switch w.outcome(to) {
		case succeeded:
			delete(w.turns, updated.namespace)
			if len(w.turns) == 0 {
				return answerNow, 0
			}
			if w.everySuccess {
				out = answerBatched
			}
		case failed:
			out = answerBatched
		}
	}
	switch rf, rt := complianceRank(from), complianceRank(to); {
	case rt > w.worst:
		out = answerBatched
	case rf == w.worst && rt < w.worst:
		if w.atWorst--; w.atWorst <= 0 {
			out = answerBatched
		}
	}
	if out == answerHeld && w.hold > replicaEventBatch {
		return answerHeld, w.hold
	}
	return answerBatched, replicaEventBatch
}

type outcome int

const (
	noOutcome outcome = iota
	succeeded
	failed
)

// outcome is what a result does to a cluster in its turn, as rollout.Planner observes it: Pending
// leaves an enforcing cluster in its turn, and a root that only informs takes any result.
func (w *awaited) outcome(result policyv1.ComplianceState) outcome {
	switch result {
	case policyv1.Compliant:
		return succeeded
	case policyv1.NonCompliant:
		if w.informs {
			return succeeded
		}
		return failed
	case policyv1.Pending:
		if w.informs {
			return succeeded
		}
	}
	return noOutcome
}

// record keeps what p waits for, read against the cache as it is now (current): an answer the
// cache took after the reconcile's read reaches route before or after this record, and read here
// it is counted either way. It says whether p is already behind the cache: a cluster in its turn
// answered, or the root's compliance moved, since the read; the root is then reconciled again.
func (g *answerGate) record(key types.NamespacedName, root *policyv1.Policy, p plan, hold time.Duration, current func(cluster string) *CachedReplica) (behind bool) {
	strategy, mode := strategyOf(root)
	w := &awaited{turns: map[string]string{}, hold: hold, informs: mode == rollout.InformAsIs,
		everySuccess: mode == rollout.Progressive && strategy.Type == clusterv1alpha1.Progressive}
	g.mu.Lock()
	defer g.mu.Unlock()
	// now counts the results the cache holds, planned those the plan read.
	var now, planned counter
	inTurn := 0
	for name, c := range p.decision.Clusters {
		hash := p.hash[p.desired[name]]
		result := policyv1.ComplianceState("")
		if rep := current(name); rep != nil && specMatches(rep, hash) {
			result = reportOf(rep)
		}
		now.add(result)
		planned.add(p.compliance[name])
		if c.Status != policyv1.RolloutProgressing {
			continue
		}
		inTurn++
		switch w.outcome(result) {
		case noOutcome:
			w.turns[name] = hash
		case succeeded:
			behind = behind || w.everySuccess
		case failed:
			behind = true
		}
	}
	w.worst, w.atWorst = now.worst, now.atWorst
	if g.roots == nil {
		g.roots = map[types.NamespacedName]*awaited{}
	}
	g.roots[key] = w
	return behind || inTurn > 0 && len(w.turns) == 0 || now.worst != planned.worst
}

func (g *answerGate) forget(key types.NamespacedName) {
	g.mu.Lock()
	defer g.mu.Unlock()
	delete(g.roots, key)
}

// counter finds the worst compliance rank of a root's clusters and how many are at it.
type counter struct{ worst, atWorst int }

func (c *counter) add(s policyv1.ComplianceState) {
	switch r := complianceRank(s); {
	case r > c.worst:
		c.worst, c.atWorst = r, 1
	case r == c.worst:
		c.atWorst++
	}
}

// complianceRank orders results as aggregateCompliance does: the root is its clusters' worst.
func complianceRank(s policyv1.ComplianceState) int {
	switch s {
	case policyv1.Compliant:
		return 0
	case policyv1.Pending:
		return 2
	case policyv1.NonCompliant:
		return 3
	}
	return 1
}

// answerOnly says whether updated differs from old in its report alone (its compliance and
// evaluated generation) and its resourceVersion. The rollout status the hub writes is not an answer.
func answerOnly(old, updated *CachedReplica) bool {
	if old.name != updated.name || old.namespace != updated.namespace || old.specHash != updated.specHash ||
		old.uid != updated.uid || old.generation != updated.generation || old.remediation != updated.remediation ||
		old.rolloutStatus != updated.rolloutStatus ||
		!maps.Equal(old.labels, updated.labels) || !maps.Equal(old.annotations, updated.annotations) {
		return false
	}
	if old.rare == updated.rare {
		return true
	}
	if old.rare == nil || updated.rare == nil {
		return false
	}
	return equality.Semantic.DeepEqual(old.rare.deletionTimestamp, updated.rare.deletionTimestamp) &&
		equality.Semantic.DeepEqual(old.rare.conditions, updated.rare.conditions) &&
		equality.Semantic.DeepEqual(old.rare.details, updated.rare.details)
}
