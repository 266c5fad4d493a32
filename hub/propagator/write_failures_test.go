package propagator_test

import (
	"fmt"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
)

const refusal = "this cluster namespace takes no replicas"

// refuseReplicas makes the apiserver refuse every create and update of a Policy in namespace, as
// a quota or an admission webhook of the cluster's owner would. It returns once a write is refused
// and a function that accepts writes again.
func (e *env) refuseReplicas(namespace string) (accept func()) {
	e.t.Helper()
	name := namespace + "-refuses-policies"
	vap := &admissionregistrationv1.ValidatingAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionregistrationv1.Fail),
			MatchConstraints: &admissionregistrationv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": namespace}},
				ResourceRules: []admissionregistrationv1.NamedRuleWithOperations{{RuleWithOperations: admissionregistrationv1.RuleWithOperations{
					Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
					Rule: admissionregistrationv1.Rule{APIGroups: []string{policyv1.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"policies"}},
				}}},
			},
			Validations: []admissionregistrationv1.Validation{{Expression: "false", Message: refusal}},
		},
	}
	binding := &admissionregistrationv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: admissionregistrationv1.ValidatingAdmissionPolicyBindingSpec{PolicyName: name,
			ValidationActions: []admissionregistrationv1.ValidationAction{admissionregistrationv1.Deny}},
	}
	e.create(vap)
	e.create(binding)
	// The apiserver enforces a new policy once its informer has it: probe until a write is refused.
	e.eventually("admission refuses policies in "+namespace, func() (bool, string) {
		probe := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "probe", Namespace: namespace},
			Spec: policyv1.PolicySpec{PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{
				Raw: []byte(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"probe"},"spec":{}}`)}}}}}
		err := e.c.Create(e.ctx, probe, client.DryRunAll)
		return err != nil && strings.Contains(err.Error(), refusal), fmt.Sprintf("dry-run create: %v", err)
	})
	return func() {
		e.t.Helper()
		if err := e.c.Delete(e.ctx, binding); err != nil {
			e.t.Fatalf("delete %s: %v", name, err)
		}
		if err := e.c.Delete(e.ctx, vap); err != nil {
			e.t.Fatalf("delete %s: %v", name, err)
		}
	}
}

func (e *env) condition(root, typ string) *metav1.Condition {
	return meta.FindStatusCondition(e.root(root).Status.Conditions, typ)
}

// One cluster namespace refusing its replica must not stop the rollout on the others, and must be
// said on the root, naming the cluster and why, until the namespace takes its replica again.
func TestWriteFailures_OneRefusingClusterIsReportedAndTheOthersRollOut(t *testing.T) {
	e := newEnv(t)
	a, b, refusing := e.cluster("a", nil), e.cluster("b", nil), e.cluster("z", nil)
	accept := e.refuseReplicas(refusing)
	e.startHub()
	e.rootPolicy("p", policyv1.Enforce, progressive(1, clusterv1alpha1.RolloutConfig{}))
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", a, b, refusing)

	// The clusters that accept their replicas take their turns and succeed, their replicas
	// carrying the rollout status the hub applies.
	e.drive("p", compliant, func(r *policyv1.Policy) bool {
		s := statuses(r)
		return s[a] == policyv1.RolloutSucceeded && s[b] == policyv1.RolloutSucceeded
	})
	e.eventually("rollout status on the replicas that were written", func() (bool, string) {
		reps := e.replicas("p")
		if _, ok := reps[refusing]; ok {
			return false, "a replica on the refusing cluster"
		}
		for _, c := range []string{a, b} {
			if reps[c] == nil || reps[c].EffectiveRolloutStatus() != policyv1.RolloutSucceeded {
				return false, fmt.Sprintf("replica on %s: %+v", c, reps[c])
			}
		}
		return true, ""
	})

	e.eventually("the root names the refusing cluster", func() (bool, string) {
		c := e.condition("p", "ReplicasWritten")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "WriteFailed" &&
			strings.Contains(c.Message, refusing) && strings.Contains(c.Message, refusal) &&
			!strings.Contains(c.Message, a+":") && !strings.Contains(c.Message, b+":"), fmt.Sprintf("condition %+v", c)
	})
	e.eventually("an Event names the refusing cluster", func() (bool, string) {
		return e.hasEvent("p", "ReplicaWriteFailed", refusing), "no ReplicaWriteFailed event naming " + refusing
	})
	if c := e.condition("p", "Propagated"); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("the selection itself is fine, Propagated is %+v", c)
	}

	// The namespace takes writes again: the hub's retry, not any new event, brings its replica.
	accept()
	e.expectReplicas("p", a, b, refusing)
	e.eventually("the root says every replica is written", func() (bool, string) {
		c := e.condition("p", "ReplicasWritten")
		return c != nil && c.Status == metav1.ConditionTrue && c.Reason == "Written", fmt.Sprintf("condition %+v", c)
	})
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 3))
}

// Enforcement is handed over, never shared: when the cluster that enforces the previous generation
// refuses the update that stops it, the next cluster's turn waits, and the root says so.
func TestWriteFailures_AClusterThatCannotStopEnforcingHoldsTheNextTurn(t *testing.T) {
	e := newEnv(t)
	a, z := e.cluster("a", nil), e.cluster("z", nil)
	e.startHub()
	e.rootPolicy("p", policyv1.Enforce, progressive(1, clusterv1alpha1.RolloutConfig{}))
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", a, z)
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 2))

	accept := e.refuseReplicas(z)
	e.edit("p", func(p *policyv1.Policy) {
		raw := strings.Replace(string(p.Spec.PolicyTemplates[0].ObjectDefinition.Raw), `"severity":"low"`, `"severity":"high"`, 1)
		p.Spec.PolicyTemplates[0].ObjectDefinition.Raw = []byte(raw)
	})
	e.eventually("the root says the turn of "+a+" waits for "+z, func() (bool, string) {
		c := e.condition("p", "ReplicasWritten")
		return c != nil && c.Status == metav1.ConditionFalse &&
			strings.Contains(c.Message, fmt.Sprintf("Enforcement on %s waits until %s", a, z)), fmt.Sprintf("condition %+v", c)
	})
	reps := e.replicas("p")
	if got := reps[a].Spec.RemediationAction; got != policyv1.Inform {
		t.Errorf("%s enforces while %s, still enforcing the previous generation, refuses its update: remediation %q", a, z, got)
	}
	if got := reps[z].Spec.RemediationAction; got != policyv1.Enforce {
		t.Fatalf("the refused update reached %s: remediation %q", z, got)
	}

	accept()
	e.drive("p", compliant, func(r *policyv1.Policy) bool {
		return aggregateIs(policyv1.RolloutSucceeded, 2)(r) && meta.FindStatusCondition(r.Status.Conditions, "Rollout").ObservedGeneration == r.Generation
	})
	e.eventually("the root says every replica is written", func() (bool, string) {
		c := e.condition("p", "ReplicasWritten")
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("condition %+v", c)
	})
}
