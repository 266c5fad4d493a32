package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet"
)

const placementYAML = `apiVersion: cluster.open-cluster-management.io/v1beta1
kind: Placement
metadata: {name: dev-then-prod, namespace: policies}
spec:
  clusterSets: [e2e]
  decisionStrategy:
    groupStrategy:
      decisionGroups:
      - groupName: dev
        groupClusterSelector: {labelSelector: {matchLabels: {environment: dev}}}
      - groupName: prod
        groupClusterSelector: {labelSelector: {matchLabels: {environment: prod}}}`

// policyYAML is an enforced ProgressivePerGroup policy whose ConfigurationPolicy applies
// objectTemplate, bound to the dev-then-prod placement.
func policyYAML(name, strategy, objectTemplate, extraSpec string) []string {
	return []string{fmt.Sprintf(`apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: %[1]s, namespace: policies}
spec:
  disabled: false
  remediationAction: enforce
  rolloutStrategy:
%[2]s
%[4]s
  policy-templates:
  - objectDefinition:
      apiVersion: policy.open-cluster-management.io/v1
      kind: ConfigurationPolicy
      metadata: {name: %[1]s}
      spec:
        remediationAction: inform
        severity: low
        object-templates:
        - complianceType: musthave
          objectDefinition:
%[3]s`, name, indent(strategy, "    "), indent(objectTemplate, "            "), extraSpec),
		fmt.Sprintf(`apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: %[1]s, namespace: policies}
placementRef: {apiGroup: cluster.open-cluster-management.io, kind: Placement, name: dev-then-prod}
subjects:
- {apiGroup: policy.open-cluster-management.io, kind: Policy, name: %[1]s}`, name)}
}

func indent(s, prefix string) string { return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix) }

// TestEndToEnd runs the spoke-addon issue's scenarios on a hub and two managed clusters, dev and
// prod, with the real regent processes.
func TestEndToEnd(t *testing.T) {
	e := deploy(t,
		fleet.ClusterSpec{Name: "dev1", Labels: map[string]string{"environment": "dev"}},
		fleet.ClusterSpec{Name: "prod1", Labels: map[string]string{"environment": "prod"}})
	e.apply(t, `apiVersion: v1
kind: Namespace
metadata: {name: policies}`, `apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata: {name: e2e}
spec: {clusterSelector: {selectorType: LabelSelector, labelSelector: {}}}`, `apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: e2e, namespace: policies}
spec: {clusterSet: e2e}`, placementYAML)

	t.Run("ProgressivePerGroupEnforcesDevThenProd", func(t *testing.T) {
		e.apply(t, policyYAML("rollout", "type: ProgressivePerGroup\nprogressivePerGroup: {minSuccessTime: 2s}",
			"apiVersion: v1\nkind: Namespace\nmetadata: {name: e2e-rollout}", "")...)
		// On every observed state: prod is not enforced before dev succeeded.
		eventually(t, 3*time.Minute, func() (bool, string) {
			dev, prod := e.replica(t, "dev1", "rollout"), e.replica(t, "prod1", "rollout")
			if prod != nil && prod.Spec.RemediationAction == policyv1.Enforce &&
				(dev == nil || dev.EffectiveRolloutStatus() != policyv1.RolloutSucceeded) {
				t.Fatalf("prod enforced while dev is %v", dev)
			}
			root := e.root(t, "rollout")
			return root.Status.RolloutStatus == policyv1.RolloutSucceeded && root.Status.ComplianceState == policyv1.Compliant,
				fmt.Sprintf("root rollout %q compliance %q", root.Status.RolloutStatus, root.Status.ComplianceState)
		})
		for name, c := range e.local {
			if err := c.Get(context.Background(), types.NamespacedName{Name: "e2e-rollout"}, &corev1.Namespace{}); err != nil {
				t.Errorf("%s: namespace the policy enforces: %v", name, err)
			}
		}
		// The root's Events tell the rollout group by group.
		eventually(t, 30*time.Second, func() (bool, string) {
			events := &eventsv1.EventList{}
			if err := e.hub.List(context.Background(), events, client.InNamespace("policies")); err != nil {
				return false, err.Error()
			}
			var seen, other []string
			for _, ev := range events.Items {
				other = append(other, ev.Regarding.Kind+"/"+ev.Regarding.Name+" "+ev.Reason)
				if ev.Regarding.Name == "rollout" {
					seen = append(seen, ev.Reason+": "+ev.Note)
				}
			}
			all := strings.Join(seen, "\n")
			for _, want := range []string{`RolloutGroupStarted: decision group "dev"`, `RolloutGroupCompleted: decision group "dev"`,
				`RolloutGroupStarted: decision group "prod"`, `RolloutGroupCompleted: decision group "prod"`, "RolloutSucceeded"} {
				if !strings.Contains(all, want) {
					return false, fmt.Sprintf("no %q among the root's events:\n%s\n(events in the namespace: %v)", want, all, other)
				}
			}
			return true, ""
		})
	})

	t.Run("NonCompliantClusterStopsTheRolloutAtTheFailureBudget", func(t *testing.T) {
		// A ConfigMap in a namespace that does not exist can be enforced nowhere: dev stays
		// NonCompliant.
		e.apply(t, policyYAML("broken", "type: ProgressivePerGroup\nprogressivePerGroup: {maxFailures: 0}",
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: does-not-exist}", "")...)
		eventually(t, 2*time.Minute, func() (bool, string) {
			root := e.root(t, "broken")
			c := meta.FindStatusCondition(root.Status.Conditions, "RolloutProgressing")
			for _, cond := range root.Status.Conditions {
				if cond.Reason == "FailureBudgetSpent" {
					c = &cond
				}
			}
			return c != nil && c.Reason == "FailureBudgetSpent" && strings.Contains(c.Message, "dev1"),
				fmt.Sprintf("root conditions %+v", root.Status.Conditions)
		})
		time.Sleep(3 * time.Second)
		if prod := e.replica(t, "prod1", "broken"); prod != nil && prod.Spec.RemediationAction == policyv1.Enforce {
			t.Fatal("prod enforced after dev spent the failure budget")
		}
	})

	t.Run("HubTemplateEncryptedValueReachesTheClusterInClear", e.encryptedValueReachesTheClusterInClear)

	t.Run("DependentTemplateWaitsForItsDependency", func(t *testing.T) {
		e.apply(t, policyYAML("gate", "type: All", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gate, namespace: gate-ns}", "")...)
		e.apply(t, policyYAML("gated", "type: All", "apiVersion: v1\nkind: Namespace\nmetadata: {name: e2e-gated}",
			"  dependencies:\n  - {apiVersion: policy.open-cluster-management.io/v1, kind: Policy, name: gate, compliance: Compliant}")...)
		eventually(t, time.Minute, func() (bool, string) {
			r := e.replica(t, "dev1", "gated")
			return r != nil && r.Status.ComplianceState == policyv1.Pending, fmt.Sprintf("gated replica %v", r)
		})
		// Give the gate its namespace on both clusters: gate turns Compliant, gated is applied.
		for _, c := range e.local {
			if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: objectMeta("gate-ns")}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, 2*time.Minute, func() (bool, string) {
			root := e.root(t, "gated")
			return root.Status.ComplianceState == policyv1.Compliant, fmt.Sprintf("gated root %+v", root.Status)
		})
	})
}

func (e *env) root(t *testing.T, name string) *policyv1.Policy {
	t.Helper()
	p := &policyv1.Policy{}
	_ = e.hub.Get(context.Background(), types.NamespacedName{Namespace: "policies", Name: name}, p)
	return p
}

func (e *env) replica(t *testing.T, cluster, name string) *policyv1.Policy {
	t.Helper()
	p := &policyv1.Policy{}
	if err := e.hub.Get(context.Background(), types.NamespacedName{Namespace: cluster, Name: "policies." + name}, p); err != nil {
		return nil
	}
	return p
}
