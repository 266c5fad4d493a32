package propagator_test

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
	"regent.dev/regent/fleet/fleettest"
)

// depsOf renders a replica's dependencies and its first template's extra dependencies.
func depsOf(p *policyv1.Policy) string {
	render := func(deps []policyv1.PolicyDependency) string {
		out := ""
		for _, d := range deps {
			out += fmt.Sprintf("[%s %s %s/%s %s]", d.APIVersion, d.Kind, d.Namespace, d.Name, d.Compliance)
		}
		return out
	}
	return render(p.Spec.Dependencies) + " extra " + render(p.Spec.PolicyTemplates[0].ExtraDependencies)
}

// TestPropagation_PolicySetDependencyBecomesItsMembers: a cluster holds no PolicySets, so, as in
// OCM, a replica carries one Policy dependency per member of the set instead, kept current as the
// set's membership changes; a set that does not exist is passed on as written.
func TestPropagation_PolicySetDependencyBecomesItsMembers(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1", nil)
	e.startHub()
	onSet := policyv1.PolicyDependency{TypeMeta: metav1.TypeMeta{APIVersion: policyv1beta1.GroupVersion.String(), Kind: "PolicySet"},
		Name: "set", Compliance: policyv1.Compliant}
	e.rootPolicy("p", policyv1.Inform, nil)
	e.edit("p", func(p *policyv1.Policy) {
		p.Spec.Dependencies = []policyv1.PolicyDependency{onSet}
		p.Spec.PolicyTemplates[0].ExtraDependencies = []policyv1.PolicyDependency{onSet}
	})
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1)
	expectDeps := func(want string) {
		t.Helper()
		e.eventually("replica dependencies", func() (bool, string) {
			rep := e.replicas("p")[c1]
			if rep == nil {
				return false, "no replica"
			}
			got := depsOf(rep)
			return got == want, "got " + got + ", want " + want
		})
	}
	asWritten := "[policy.open-cluster-management.io/v1beta1 PolicySet /set Compliant]"
	expectDeps(asWritten + " extra " + asWritten)

	e.create(&policyv1beta1.PolicySet{ObjectMeta: e.objectMeta("set"), Spec: policyv1beta1.PolicySetSpec{Policies: []policyv1beta1.NonEmptyString{"a", "b"}}})
	members := fmt.Sprintf("[policy.open-cluster-management.io/v1 Policy %s/a Compliant][policy.open-cluster-management.io/v1 Policy %s/b Compliant]", e.ns, e.ns)
	expectDeps(members + " extra " + members)

	set := &policyv1beta1.PolicySet{ObjectMeta: e.objectMeta("set")}
	fleettest.Edit(t, e.c, set, func(s *policyv1beta1.PolicySet) { s.Spec.Policies = []policyv1beta1.NonEmptyString{"b"} })
	one := fmt.Sprintf("[policy.open-cluster-management.io/v1 Policy %s/b Compliant]", e.ns)
	expectDeps(one + " extra " + one)
}
