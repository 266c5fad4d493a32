package status_test

import (
	"os"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"
	"sigs.k8s.io/yaml"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/cli/status"
)

var goldenNow = time.Date(2026, 11, 23, 10, 10, 0, 0, time.UTC)

func fixtureRollout(t *testing.T) status.Rollout {
	t.Helper()
	raw, err := os.ReadFile("testdata/rollout_root.yaml")
	if err != nil {
		t.Fatal(err)
	}
	root := &policyv1.Policy{}
	if err := yaml.UnmarshalStrict(raw, root); err != nil {
		t.Fatal(err)
	}
	groups := sdkv1beta1.ClusterGroupsMap{
		{GroupIndex: 0, GroupName: "canary"}: sets.New("canary1", "canary2"),
		{GroupIndex: 1, GroupName: "eu"}:     sets.New("eu1", "eu2", "eu3"),
		{GroupIndex: 2, GroupName: "us"}:     sets.New("us1"),
	}
	return status.BuildRollout(root, groups, goldenNow)
}

func TestRolloutTable_Golden(t *testing.T) {
	r := fixtureRollout(t)
	var b strings.Builder
	if err := r.WriteTable(&b, goldenNow); err != nil {
		t.Fatal(err)
	}
	golden(t, "rollout.golden", b.String())
}

func TestRollout_SoakDeadlineAndBudgetComeFromTheRecordAndTheStrategy(t *testing.T) {
	r := fixtureRollout(t)
	want := map[string]string{
		// Succeeded at 10:01 and 10:02 with a 5m soak: over at 10:10.
		"canary1": "",
		"canary2": "",
		// Succeeded at 10:08: 3m of soak left.
		"eu1": "soak time, 3m0s left",
		// Progressing since 10:06:30 with a 10m deadline: 6m30s left.
		"eu3": "compliance at the current generation, deadline in 6m30s",
		"eu2": "NonCompliant: counts against the failure budget",
		// The eu group is not finished, so us waits for it.
		"us1":  "its turn: group 1 (eu) is not finished",
		"gone": "no longer selected: the hub removes its replica",
	}
	for _, g := range r.Groups {
		for _, c := range g.Clusters {
			if c.Waiting != want[c.Name] {
				t.Errorf("%s waits for %q, want %q", c.Name, c.Waiting, want[c.Name])
			}
		}
	}
	if g := r.Groups[0]; !g.Mandatory || g.Budget == nil || g.Budget.Allowed != 0 {
		t.Errorf("canary group %+v: want mandatory with no failure allowed", g)
	}
	if g := r.Groups[1]; g.Budget == nil || g.Budget.Used != 1 || g.Budget.Allowed != 1 || g.Budget.Spent {
		t.Errorf("eu group budget %+v: want 1 of 1 used, not spent", g.Budget)
	}
	if done, _ := r.Finished(); done {
		t.Errorf("a Progressing rollout reads as finished")
	}
}

func TestWhyTable_Golden(t *testing.T) {
	since := metav1.NewTime(goldenNow.Add(-90 * time.Second))
	fails := int64(2)
	w := status.Why{
		Namespace: "policies", Policy: "require-labels", Cluster: "eu1", Selected: true, Group: "1 eu",
		Placement: []status.PlacementReason{
			{Binding: "bind-eu", Kind: "Placement", Name: "eu", Chosen: true, Group: "1 eu"},
			{Binding: "bind-us", Kind: "Placement", Name: "us", PolicySet: "baseline", Detail: "not in the placement's decisions; AllDecisionsScheduled: All cluster decisions scheduled"},
		},
		Rollout: &status.ClusterState{Name: "eu1", Status: policyv1.RolloutProgressing, Compliance: policyv1.Pending, Since: &since, Violations: &fails,
			Waiting: "compliance at the current generation, deadline in 8m30s"},
		Replica:      &status.ReplicaState{Name: "policies.require-labels", RemediationAction: "enforce", Generation: 4, LastEvaluatedGeneration: 4, Compliance: policyv1.Pending},
		Dependencies: []string{"Policy base must be Compliant"},
		Unmet:        []string{"Policy policies.base is NonCompliant, want Compliant"},
		Templates: []status.Template{{Kind: "ConfigurationPolicy", Name: "require-labels", Compliance: policyv1.Pending,
			Message: "Dependencies were not satisfied: Policy policies.base is NonCompliant, want Compliant"}},
		Report: &status.Counts{Pass: 10, Fail: 2},
	}
	var b strings.Builder
	if err := w.WriteTable(&b, goldenNow); err != nil {
		t.Fatal(err)
	}
	golden(t, "why.golden", b.String())
}

func TestRollout_Progressive_WaitingClustersNameTheFullConcurrency(t *testing.T) {
	since := metav1.NewTime(goldenNow.Add(-time.Minute))
	root := &policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Generation: 1},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Enforce, RolloutStrategy: &clusterv1alpha1.RolloutStrategy{
			Type: clusterv1alpha1.Progressive, Progressive: &clusterv1alpha1.RolloutProgressive{MaxConcurrency: intstr.FromInt(1)}}},
		Status: policyv1.PolicyStatus{RolloutStatus: policyv1.RolloutProgressing,
			Conditions: []metav1.Condition{{Type: "Rollout", Status: metav1.ConditionFalse, Reason: "Progressing", ObservedGeneration: 1}},
			Status: []*policyv1.CompliancePerClusterStatus{
				{ClusterName: "a", RolloutStatus: policyv1.RolloutProgressing, LastTransitionTime: &since},
				{ClusterName: "b", RolloutStatus: policyv1.RolloutToApply, LastTransitionTime: &since},
			}},
	}
	r := status.BuildRollout(root, sdkv1beta1.ClusterGroupsMap{{GroupIndex: 0}: sets.New("a", "b")}, goldenNow)
	_, b := clusterIn(r, "b")
	if b.Waiting != "its turn: all 1 slots of maxConcurrency are taken" {
		t.Errorf("b waits for %q, want the full maxConcurrency named", b.Waiting)
	}
	if r.Budget == nil || r.Budget.Allowed != 0 || r.Budget.Used != 0 {
		t.Errorf("budget %+v, want 0 of 0 (maxFailures unset)", r.Budget)
	}
}
