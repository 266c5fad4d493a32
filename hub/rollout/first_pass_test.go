package rollout

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

func TestFirstPass_EveryClusterWaitsAsToApplyAndNoneStarts(t *testing.T) {
	s := newSim(t, Progressive, clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive,
		Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: intstr.FromInt(2)}}, oneGroup("a", "b", "c"))
	d, err := s.planner.FirstPass(s.in)
	if err != nil {
		t.Fatal(err)
	}
	if len(d.Started) != 0 || d.RecheckAfter != nil {
		t.Errorf("first pass started %v (recheck %v); turns belong to the next decision", d.Started, d.RecheckAfter)
	}
	for _, n := range []string{"a", "b", "c"} {
		c := d.Clusters[n]
		if c.Status != policyv1.RolloutToApply || c.LastTransitionTime == nil {
			t.Errorf("%s: %+v, want ToApply with a transition time", n, c)
		}
	}
	if d.Aggregate != policyv1.RolloutProgressing {
		t.Errorf("aggregate %q, want Progressing", d.Aggregate)
	}
	// The next decision, on what the first recorded, hands out the first turn.
	for n, c := range d.Clusters {
		s.in.Clusters[n] = c
	}
	if next := s.plan(); len(next.Started) != 2 {
		t.Errorf("second decision started %v, want two clusters (maxConcurrency 2)", next.Started)
	}
}

func TestFirstPass_RejectsABadStrategyBeforeAnythingIsWritten(t *testing.T) {
	s := newSim(t, Progressive, clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive,
		Progressive: &clusterv1alpha1.RolloutProgressive{RolloutConfig: clusterv1alpha1.RolloutConfig{ProgressDeadline: "soon"}}}, oneGroup("a"))
	if _, err := s.planner.FirstPass(s.in); err == nil || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("FirstPass error %v, want the handler's complaint about the deadline", err)
	}
}
