package propagator_test

import (
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
)

func TestPropagation_BindingOverrideEnforcesWithStrategyAll(t *testing.T) {
	e := newEnv(t)
	c1, c2 := e.cluster("c1", nil), e.cluster("c2", nil)
	e.startHub()
	e.rootPolicy("p", policyv1.Inform, nil)
	e.bind("b", "pl", policySubject("p"))
	fleettest.Edit(t, e.c, e.bind("b-enforce", "pl-enforce", policySubject("p")), func(b *policyv1.PlacementBinding) {
		b.BindingOverrides.RemediationAction = "Enforce"
		b.SubFilter = "restricted"
	})
	e.decide("pl", 0, "", c1, c2)
	e.decide("pl-enforce", 0, "", c2)
	e.eventually("override on c2 only", func() (bool, string) {
		reps := e.replicas("p")
		if len(reps) != 2 {
			return false, fmt.Sprintf("%d replicas", len(reps))
		}
		return reps[c1].Spec.RemediationAction == policyv1.Inform && reps[c2].Spec.RemediationAction == policyv1.Enforce,
			fmt.Sprintf("%s %s, %s %s", c1, reps[c1].Spec.RemediationAction, c2, reps[c2].Spec.RemediationAction)
	})
}

func TestPropagation_BindingOverrideIsIgnoredWithAProgressiveStrategy(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1", nil)
	e.startHub()
	e.rootPolicy("p", policyv1.Inform, &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive})
	fleettest.Edit(t, e.c, e.bind("b", "pl", policySubject("p")), func(b *policyv1.PlacementBinding) {
		b.BindingOverrides.RemediationAction = "Enforce"
	})
	e.decide("pl", 0, "", c1)
	e.eventually("override ignored, and said so", func() (bool, string) {
		r := e.root("p")
		c := meta.FindStatusCondition(r.Status.Conditions, "BindingOverridesIgnored")
		rep := e.replicas("p")[c1]
		return c != nil && rep != nil && rep.Spec.RemediationAction == policyv1.Inform, fmt.Sprintf("condition %+v", c)
	})
}
