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

// rolloutStatusReachesTheCopy: the propagator sets each replica's rollout status on the hub, except
// the initial one, which a replica without any means; the managed cluster's copy carries it
// either way, and `kubectl get policies` there shows it in the "Rollout status" column (read here
// as kubectl reads it: the apiserver's table).
func (s *suite) rolloutStatusReachesTheCopy(t *testing.T, localCfg *rest.Config) {
	ctx := context.Background()
	// As the propagator creates a progressive rollout's replica in its first pass: inform, and its
	// creation the only write.
	p := s.replica(t, "rollout-column", func(p *policyv1.Policy) {
		p.Spec.RolloutStrategy = &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.Progressive}
	})
	if err := s.hub.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	for _, status := range []policyv1.RolloutStatus{policyv1.RolloutToApply, policyv1.RolloutSucceeded} {
		if status != policyv1.InitialRolloutStatus(&p.Spec) {
			// What the hub's propagator writes on the replica.
			patch := fmt.Sprintf(`{"status":{"rolloutStatus":%q}}`, status)
			if err := s.hub.Status().Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				t.Fatal(err)
			}
		}
		s.localPolicy(t, p.Name, func(l *policyv1.Policy) (bool, string) {
			return l.Status.RolloutStatus == status, fmt.Sprintf("local rollout status %q, want %q", l.Status.RolloutStatus, status)
		})
		if got := rolloutColumn(t, localCfg, p.Namespace, p.Name); got != string(status) {
			t.Errorf("kubectl get policies on the managed cluster shows Rollout status %q, want %q", got, status)
		}
	}
	// The managed cluster's compliance still reaches the hub without taking the hub's field away.
	s.playConfigPolicy(t, "rollout-column-cfg", policyv1.Compliant)
	s.hubPolicy(t, p.Name, func(h *policyv1.Policy) (bool, string) {
		return h.Status.ComplianceState == policyv1.Compliant && h.Status.RolloutStatus == policyv1.RolloutSucceeded,
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
