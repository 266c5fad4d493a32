package propagator_test

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// inFlightWatch follows every replica of a root through one watch — events arrive in the order
// the apiserver committed them — and checks on every observed state that no more than max
// clusters are enforced without having answered Compliant for their current generation.
type inFlightWatch struct {
	mu         sync.Mutex
	replicas   map[string]*policyv1.Policy
	max        int
	peak       int
	violations []string
	stop       func()
	done       chan struct{}
	// enforcedEver lists every cluster that carried an enforced replica, in order.
	enforcedEver []string
	// seen is every replica version observed, in commit order.
	seen []*policyv1.Policy
}

// firstCarrying returns, per cluster, the remediation of the first replica version whose
// template contains marker: how that version of the root first reached the cluster.
func (iw *inFlightWatch) firstCarrying(marker string) map[string]policyv1.RemediationAction {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	out := map[string]policyv1.RemediationAction{}
	for _, p := range iw.seen {
		if _, ok := out[p.Namespace]; ok || len(p.Spec.PolicyTemplates) == 0 {
			continue
		}
		if strings.Contains(string(p.Spec.PolicyTemplates[0].ObjectDefinition.Raw), marker) {
			out[p.Namespace] = p.Spec.RemediationAction
		}
	}
	return out
}

func (e *env) watchInFlight(root string, max int) *inFlightWatch {
	e.t.Helper()
	w, err := e.c.Watch(e.ctx, &policyv1.PolicyList{}, client.MatchingLabels{propagator.RootPolicyLabel: e.ns + "." + root})
	if err != nil {
		e.t.Fatalf("watch replicas: %v", err)
	}
	iw := &inFlightWatch{replicas: map[string]*policyv1.Policy{}, max: max, stop: w.Stop, done: make(chan struct{})}
	go func() {
		defer close(iw.done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*policyv1.Policy)
			if !ok {
				continue
			}
			iw.observe(ev.Type, p)
		}
	}()
	e.t.Cleanup(iw.close)
	return iw
}

func (iw *inFlightWatch) observe(t watch.EventType, p *policyv1.Policy) {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	if t == watch.Deleted {
		delete(iw.replicas, p.Namespace)
		return
	}
	prev := iw.replicas[p.Namespace]
	iw.replicas[p.Namespace] = p
	iw.seen = append(iw.seen, p)
	if p.Spec.RemediationAction == policyv1.Enforce && (prev == nil || prev.Spec.RemediationAction != policyv1.Enforce) {
		iw.enforcedEver = append(iw.enforcedEver, p.Namespace)
	}
	var inFlight []string
	for cluster, r := range iw.replicas {
		done := r.Status.ComplianceState == policyv1.Compliant && r.Status.LastEvaluatedGeneration == r.Generation
		if r.Spec.RemediationAction == policyv1.Enforce && !done {
			inFlight = append(inFlight, cluster)
		}
	}
	iw.peak = max(iw.peak, len(inFlight))
	if len(inFlight) > iw.max {
		sort.Strings(inFlight)
		iw.violations = append(iw.violations, fmt.Sprintf("rv %s: %d in flight (%s), max %d", p.ResourceVersion, len(inFlight), strings.Join(inFlight, ","), iw.max))
	}
}

func (iw *inFlightWatch) close() {
	if iw.stop != nil {
		iw.stop()
		<-iw.done
		iw.stop = nil
	}
}

// check closes the watch and returns the violations seen and the peak concurrency.
func (iw *inFlightWatch) check() (violations []string, peak int, order []string) {
	iw.close()
	iw.mu.Lock()
	defer iw.mu.Unlock()
	return iw.violations, iw.peak, iw.enforcedEver
}
