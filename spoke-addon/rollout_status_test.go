package spokeaddon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// rolloutStatusReachesTheCopy: the propagator writes a replica's rollout status on the hub only
// where the replica does not imply it (its spec and its report on its generation:
// policyv1.ImpliedRolloutStatus); the managed cluster's copy carries it either way, and
// `kubectl get policies` there shows it in the "Rollout status" column (read here as kubectl
// reads it: the apiserver's table).
func (s *suite) rolloutStatusReachesTheCopy(t *testing.T, localCfg *rest.Config) {
	ctx := context.Background()
	name := "default.rollout-column"
	column := func(status policyv1.RolloutStatus) {
		t.Helper()
		s.localPolicy(t, name, func(l *policyv1.Policy) (bool, string) {
			return l.Status.RolloutStatus == status, fmt.Sprintf("local rollout status %q, want %q", l.Status.RolloutStatus, status)
		})
		if got := rolloutColumn(t, localCfg, "cluster1", name); got != string(status) {
			t.Errorf("kubectl get policies on the managed cluster shows Rollout status %q, want %q", got, status)
		}
	}
	// As the propagator creates a progressive rollout's replica in its first pass: inform, and its
	// creation the only write. It waits for its turn.
	p := s.replica(t, "rollout-column", func(p *policyv1.Policy) {
		p.Spec.RolloutStrategy = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive}
	})
	if err := s.hub.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	column(policyv1.RolloutToApply)
	// Its turn: the spec turned to enforce, nothing written in its status.
	s.updateReplica(t, p.Name, func(p *policyv1.Policy) { p.Spec.RemediationAction = policyv1.Enforce })
	column(policyv1.RolloutProgressing)
	// The managed cluster's report on that generation is the rollout's success.
	s.playConfigPolicy(t, "rollout-column-cfg", policyv1.Compliant)
	s.hubPolicy(t, p.Name, func(h *policyv1.Policy) (bool, string) {
		return h.ReportedCompliance() == policyv1.Compliant && h.Status.RolloutStatus == "",
			fmt.Sprintf("hub replica compliant %q at %d of %d, rollout %q", h.Status.ComplianceState, h.Status.LastEvaluatedGeneration, h.Generation, h.Status.RolloutStatus)
	})
	column(policyv1.RolloutSucceeded)
	// A status the replica does not imply is written for its generation, as the propagator
	// writes it, and wins; the managed cluster's compliance does not take the hub's field away.
	h := &policyv1.Policy{}
	if err := s.hub.Get(ctx, types.NamespacedName{Namespace: p.Namespace, Name: p.Name}, h); err != nil {
		t.Fatal(err)
	}
	patch := fmt.Sprintf(`{"status":{"rolloutStatus":"TimeOut","conditions":[{"type":%q,"status":"False","reason":"TimeOut","message":"set by the hub","observedGeneration":%d,"lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`,
		policyv1.RolloutConditionType, h.Generation)
	if err := s.hub.Status().Patch(ctx, h, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	column(policyv1.RolloutTimeOut)
	s.hubPolicy(t, p.Name, func(h *policyv1.Policy) (bool, string) {
		return h.Status.ComplianceState == policyv1.Compliant && h.Status.RolloutStatus == policyv1.RolloutTimeOut,
			fmt.Sprintf("hub replica compliant %q rollout %q", h.Status.ComplianceState, h.Status.RolloutStatus)
	})
}

// rolloutColumn returns the "Rollout status" cell of a policy as the apiserver prints it.
func rolloutColumn(t *testing.T, cfg *rest.Config, namespace, name string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	body, err := cs.CoreV1().RESTClient().Get().
		AbsPath("/apis/policy.open-cluster-management.io/v1/namespaces", namespace, "policies", name).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").
		DoRaw(context.Background())
	if err != nil {
		t.Fatalf("get %s/%s as a table: %v", namespace, name, err)
	}
	table := &metav1.Table{}
	if err := json.Unmarshal(body, table); err != nil || len(table.Rows) != 1 {
		t.Fatalf("table of %s/%s: %v (%s)", namespace, name, err, body)
	}
	for i, col := range table.ColumnDefinitions {
		if col.Name == "Rollout status" {
			v, _ := table.Rows[0].Cells[i].(string)
			return v
		}
	}
	t.Fatalf("the managed cluster's Policy CRD has no Rollout status column: %+v", table.ColumnDefinitions)
	return ""
}
