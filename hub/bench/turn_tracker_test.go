package bench

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// turnTracker follows the turns of progressive rollouts over decision groups of 100 clusters as a
// watch of the replicas sees them: answered[root][group] is closed once every replica of the
// group was answered Compliant at its generation while enforced. It also times each turn, the
// same way for the hub and for the rollout ceiling, so that a slower rate of turns is told apart
// by where the time goes (summary):
//   - react: from a group's last answer to the first replica of the next group enforced (the
//     propagator's decision, and its root status write);
//   - send: from the first to the last replica of a group enforced (the writes);
//   - answer: from the last replica of a group enforced to its last answer (the spokes).
type turnTracker struct {
	groups   int
	root     map[string]int
	cluster  map[string]int
	size     []int
	mu       sync.Mutex
	answered [][]chan struct{}
	turns    [][]turnTimes
	// enforcedOnce and answeredOnce are the replicas already counted as such.
	enforcedOnce, answeredOnce map[types.NamespacedName]bool
}

type turnTimes struct {
	firstEnforced, lastEnforced, answered time.Time
	enforced, answers                     int
}

func newTurnTracker(roots, clusters []string) *turnTracker {
	t := &turnTracker{groups: (len(clusters) + 99) / 100, root: map[string]int{}, cluster: map[string]int{},
		enforcedOnce: map[types.NamespacedName]bool{}, answeredOnce: map[types.NamespacedName]bool{}}
	for r, name := range roots {
		t.root[name] = r
	}
	for k, name := range clusters {
		t.cluster[name] = k
	}
	for g := 0; g < t.groups; g++ {
		t.size = append(t.size, min(100, len(clusters)-g*100))
	}
	for range roots {
		answered := make([]chan struct{}, t.groups)
		for g := range answered {
			answered[g] = make(chan struct{})
		}
		t.answered, t.turns = append(t.answered, answered), append(t.turns, make([]turnTimes, t.groups))
	}
	return t
}

// seen records p, a replica as a watch delivered it.
func (t *turnTracker) seen(p *policyv1.Policy) {
	if p.Spec.RemediationAction != policyv1.Enforce {
		return
	}
	r, ok := t.root[p.Labels[propagator.RootPolicyLabel]]
	k, known := t.cluster[p.Namespace]
	if !ok || !known {
		return
	}
	now, g := time.Now(), k/100
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	t.mu.Lock()
	defer t.mu.Unlock()
	turn := &t.turns[r][g]
	if !t.enforcedOnce[key] {
		t.enforcedOnce[key] = true
		if turn.enforced == 0 {
			turn.firstEnforced = now
		}
		turn.enforced++
		turn.lastEnforced = now
	}
	answered := p.Status.LastEvaluatedGeneration == p.Generation && p.Status.ComplianceState == policyv1.Compliant
	if !answered || t.answeredOnce[key] {
		return
	}
	t.answeredOnce[key] = true
	if turn.answers++; turn.answers == t.size[g] {
		turn.answered = now
		close(t.answered[r][g])
	}
}

// summary gives the medians and 90th percentiles of the complete turns' phases, in seconds.
func (t *turnTracker) summary() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	var react, send, answer []float64
	for _, groups := range t.turns {
		for g, turn := range groups {
			if turn.enforced < t.size[g] || turn.answered.IsZero() {
				continue
			}
			send = append(send, turn.lastEnforced.Sub(turn.firstEnforced).Seconds())
			answer = append(answer, turn.answered.Sub(turn.lastEnforced).Seconds())
			if g > 0 && !groups[g-1].answered.IsZero() {
				react = append(react, turn.firstEnforced.Sub(groups[g-1].answered).Seconds())
			}
		}
	}
	return fmt.Sprintf("%d turns: react %s, send %s, answer %s (median/p90 seconds)", len(send),
		quantiles(react), quantiles(send), quantiles(answer))
}

func quantiles(v []float64) string {
	if len(v) == 0 {
		return "-"
	}
	slices.Sort(v)
	return fmt.Sprintf("%.2f/%.2f", v[len(v)/2], v[len(v)*9/10])
}
