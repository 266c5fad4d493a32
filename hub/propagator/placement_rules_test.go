package propagator_test

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// ruleDecides writes a PlacementRule's decisions, as OCM's placement rule controller would.
func (e *env) ruleDecides(name string, clusters ...string) {
	e.t.Helper()
	rule := &unstructured.Unstructured{}
	rule.SetAPIVersion("apps.open-cluster-management.io/v1")
	rule.SetKind("PlacementRule")
	rule.SetNamespace(e.ns)
	rule.SetName(name)
	if err := e.c.Get(e.ctx, e.key(name), rule); err != nil {
		rule.Object["spec"] = map[string]any{"clusterSelector": map[string]any{}}
		e.create(rule)
	}
	decisions := make([]any, 0, len(clusters))
	for _, c := range clusters {
		decisions = append(decisions, map[string]any{"clusterName": c, "clusterNamespace": c})
	}
	rule.Object["status"] = map[string]any{"decisions": decisions}
	if err := e.c.Status().Update(e.ctx, rule); err != nil {
		e.t.Fatalf("decisions of placement rule %s: %v", name, err)
	}
}

// A policy bound through a PlacementRule (OCM's deprecated kind, still in much existing YAML) is
// rolled out over the rule's decisions like over a Placement's, follows them as they change, and
// says on its status that the kind is deprecated.
func TestPlacementRules_DecisionsAreOneGroupRolledOutAndWatched(t *testing.T) {
	if _, err := envtest.InstallCRDs(hubCluster.Config, envtest.CRDInstallOptions{Paths: []string{"testdata/placementrule-crd.yaml"}}); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	c1, c2, c3 := e.cluster("c1", nil), e.cluster("c2", nil), e.cluster("c3", nil)
	e.startHub()
	iw := e.watchInFlight("p", 1)
	e.ruleDecides("rule", c1, c2)
	e.rootPolicy("p", policyv1.Enforce, progressive(1, clusterv1alpha1.RolloutConfig{}))
	e.create(&policyv1.PlacementBinding{ObjectMeta: e.objectMeta("b"),
		PlacementRef: policyv1.PlacementSubject{APIGroup: "apps.open-cluster-management.io", Kind: "PlacementRule", Name: "rule"},
		Subjects:     []policyv1.Subject{policySubject("p")}})
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 2))

	r := e.root("p")
	if len(r.Status.Placement) != 1 || r.Status.Placement[0].PlacementRule != "rule" || r.Status.Placement[0].PlacementBinding != "b" {
		t.Errorf("status.placement %+v, want binding b with placementRule rule", r.Status.Placement)
	}
	c := meta.FindStatusCondition(r.Status.Conditions, "PlacementRuleDeprecated")
	if c == nil || !strings.Contains(c.Message, "deprecated") || !strings.Contains(c.Message, "b") {
		t.Errorf("PlacementRuleDeprecated condition %+v, want the deprecation note naming binding b", c)
	}

	// The rule's decisions change: the policy follows.
	e.ruleDecides("rule", c1, c2, c3)
	e.expectReplicas("p", c1, c2, c3)
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 3))
	e.ruleDecides("rule", c2, c3)
	e.expectReplicas("p", c2, c3)

	if order := expectNoViolations(t, iw); fmt.Sprint(order) != fmt.Sprint([]string{c1, c2, c3}) {
		t.Errorf("enforced in order %v, want one at a time %v", order, []string{c1, c2, c3})
	}
}
