package propagator_test

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// remediationsOf returns, in commit order, the remediation of every version of cluster's replica
// the watch saw, repeated versions folded.
func (iw *inFlightWatch) remediationsOf(cluster string) []policyv1.RemediationAction {
	iw.mu.Lock()
	defer iw.mu.Unlock()
	var out []policyv1.RemediationAction
	for _, p := range iw.seen {
		if p.Namespace == cluster && (len(out) == 0 || out[len(out)-1] != p.Spec.RemediationAction) {
			out = append(out, p.Spec.RemediationAction)
		}
	}
	return out
}

// A cluster that joins the placement gets a miniature rollout of its own, as the seed says: the
// current version as inform first, then its turn to enforce — also when its turn is free at once,
// whether the rollout is still in progress or already succeeded.
func TestRollout_JoiningClusterGetsTheVersionAsInformBeforeItsTurn(t *testing.T) {
	e := newEnv(t)
	c1, c2 := e.cluster("c1", nil), e.cluster("c2", nil)
	e.startHub()
	iw := e.watchInFlight("p", 1)
	soak := clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: time.Second}}
	e.rootPolicy("p", policyv1.Enforce, progressive(1, soak))
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1, c2)

	// In progress: c1 enforced and answered, c2 still waiting. A cluster named before both joins;
	// the handler fills its window in name order, so its turn is due as soon as c1's soak ends.
	e.drive("p", compliant, func(r *policyv1.Policy) bool { return statuses(r)[c1] == policyv1.RolloutSucceeded })
	early := e.cluster("a0", nil)
	e.decide("pl", 0, "", early, c1, c2)
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 3))

	// Succeeded: one more joins, with every slot free.
	late := e.cluster("z9", nil)
	e.decide("pl", 0, "", early, c1, c2, late)
	e.eventually("the late cluster is recorded", func() (bool, string) {
		s := statuses(e.root("p"))
		_, ok := s[late]
		return ok, fmt.Sprint(s)
	})
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 4))

	expectNoViolations(t, iw)
	want := fmt.Sprint([]policyv1.RemediationAction{policyv1.Inform, policyv1.Enforce})
	for _, c := range []string{c1, c2, early, late} {
		if got := fmt.Sprint(iw.remediationsOf(c)); got != want {
			t.Errorf("%s's replica went through %s, want %s", c, got, want)
		}
	}
}
