package propagator_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// A root without a remediationAction enforces through its templates' own; its rollout is as
// progressive as that of a root that says enforce: every cluster first gets the policy set to
// inform (which overrides the templates), then group after group the root as it is.
func TestRollout_ProgressivePerGroup_RootWithoutRemediationWhoseTemplatesEnforce(t *testing.T) {
	e := newEnv(t)
	a1, a2, b1 := e.cluster("a1", nil), e.cluster("a2", nil), e.cluster("b1", nil)
	e.startHub()
	iw := e.watchInFlight("p", 3)
	tmpl := `{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"p"},"spec":{"remediationAction":"enforce","object-templates":[]}}`
	e.create(&policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: e.ns},
		Spec: policyv1.PolicySpec{
			RolloutStrategy: &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup,
				ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{}},
			PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: []byte(tmpl)}}},
		}})
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "first", a1, a2)
	e.decide("pl", 1, "second", b1)

	e.eventually("the first group enforces, the second waits as inform", func() (bool, string) {
		r, reps := e.root("p"), e.replicas("p")
		s := statuses(r)
		b := reps[b1]
		return s[a1] == policyv1.RolloutProgressing && s[a2] == policyv1.RolloutProgressing && s[b1] == policyv1.RolloutToApply &&
				b != nil && b.Spec.RemediationAction == policyv1.Inform,
			fmt.Sprintf("statuses %v, %s's replica %v", s, b1, b)
	})
	// The spokes answer for the version they enforce (the root as is: no policy-level action).
	e.eventually("rollout of p", func() (bool, string) {
		r := e.root("p")
		if r.Status.RolloutStatus == policyv1.RolloutSucceeded && len(r.Status.Status) == 3 {
			return true, ""
		}
		for cluster, rep := range e.replicas("p") {
			if rep.Spec.RemediationAction == "" && rep.Status.LastEvaluatedGeneration != rep.Generation {
				e.answer("p", cluster, policyv1.Compliant)
			}
		}
		return false, fmt.Sprintf("rollout %s, clusters %v", r.Status.RolloutStatus, statuses(r))
	})

	iw.check()
	first := map[string]policyv1.RemediationAction{}
	activeAt := map[string]int{}
	for i, rep := range iw.seen {
		if _, ok := first[rep.Namespace]; !ok {
			first[rep.Namespace] = rep.Spec.RemediationAction
		}
		if _, ok := activeAt[rep.Namespace]; !ok && rep.Spec.RemediationAction == "" {
			activeAt[rep.Namespace] = i
		}
	}
	for _, c := range []string{a1, a2, b1} {
		if first[c] != policyv1.Inform {
			t.Errorf("%s's replica first carried remediationAction %q, want inform", c, first[c])
		}
		if _, ok := activeAt[c]; !ok {
			t.Errorf("%s never got the root as it is", c)
		}
	}
	if activeAt[b1] < activeAt[a1] || activeAt[b1] < activeAt[a2] {
		t.Errorf("group second enforced before group first: watch positions %v", activeAt)
	}
}
