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

// turnAnatomy times the turns of progressive rollouts over decision groups of 100 clusters as a
// watch of the replicas sees them, the same way for the hub and for the rollout ceiling, so that
// a slower rate of turns is told apart by where the time goes:
//   - react: from a group's last answer to the first replica of the next group enforced (the
//     propagator's decision, and its root status write);
//   - send: from the first to the last replica of a group enforced (the writes);
//   - answer: from the last replica of a group enforced to its last answer (the spokes).
type turnAnatomy struct {
	cluster map[string]int
	mu      sync.Mutex
	turns   map[turnOf]*turnTimes
	// enforced and answered are the replicas already counted as such.
	enforced, answered map[types.NamespacedName]bool
}

type turnOf struct {
	root  string
	group int
}

type turnTimes struct {
	firstEnforced, lastEnforced, answered time.Time
	enforced, answers                     int
}

func newTurnAnatomy(clusters []string) *turnAnatomy {
	a := &turnAnatomy{cluster: map[string]int{}, turns: map[turnOf]*turnTimes{},
		enforced: map[types.NamespacedName]bool{}, answered: map[types.NamespacedName]bool{}}
	for k, name := range clusters {
		a.cluster[name] = k
	}
	return a
}

// size is the number of clusters in group g.
func (a *turnAnatomy) size(g int) int { return min(100, len(a.cluster)-g*100) }

// observe records p, a replica as a watch delivered it.
func (a *turnAnatomy) observe(p *policyv1.Policy) {
	k, ok := a.cluster[p.Namespace]
	if !ok || p.Spec.RemediationAction != policyv1.Enforce {
		return
	}
	now := time.Now()
	key := types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
	answered := p.Status.LastEvaluatedGeneration == p.Generation && p.Status.ComplianceState == policyv1.Compliant
	a.mu.Lock()
	defer a.mu.Unlock()
	at := turnOf{root: p.Labels[propagator.RootPolicyLabel], group: k / 100}
	t := a.turns[at]
	if t == nil {
		t = &turnTimes{}
		a.turns[at] = t
	}
	if !a.enforced[key] {
		a.enforced[key] = true
		if t.enforced == 0 {
			t.firstEnforced = now
		}
		t.enforced++
		t.lastEnforced = now
	}
	if answered && !a.answered[key] {
		a.answered[key] = true
		if t.answers++; t.answers == a.size(at.group) {
			t.answered = now
		}
	}
}

// summary gives the medians and 90th percentiles of the complete turns' phases, in seconds.
func (a *turnAnatomy) summary() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var react, send, answer []float64
	for at, t := range a.turns {
		if t.enforced < a.size(at.group) || t.answered.IsZero() {
			continue
		}
		send = append(send, t.lastEnforced.Sub(t.firstEnforced).Seconds())
		answer = append(answer, t.answered.Sub(t.lastEnforced).Seconds())
		if prev := a.turns[turnOf{root: at.root, group: at.group - 1}]; at.group > 0 && prev != nil && !prev.answered.IsZero() {
			react = append(react, t.firstEnforced.Sub(prev.answered).Seconds())
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
