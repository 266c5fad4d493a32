package opa

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/record"

	"regent.dev/regent/fleet/fleettest"
)

// OCM's placement controller writes a Placement's status while the remediator evaluates it; the
// remediator's patch, pinned to the version it evaluated, then conflicts. The informer ignores
// status-only updates, so the remediator must queue the Placement again itself, or the new
// answer is never applied (the EU/PCI end-to-end test timed out on this under CI's load).
func TestRemediator_AConflictWithAStatusWriteIsEvaluatedAgain(t *testing.T) {
	h := fleettest.Hub(t)
	ctx := context.Background()
	dyn, err := dynamic.NewForConfig(h.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(corev1.SchemeGroupVersion.WithResource("namespaces")).Create(ctx,
		&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "payments"}}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(newPlacement("payments", "pl", regionPredicate("eu")))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: raw}
	u.SetAPIVersion("cluster.open-cluster-management.io/v1beta1")
	u.SetKind("Placement")
	placements := dyn.Resource(PlacementsGVR).Namespace("payments")
	evaluated, err := placements.Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// the status write the remediator did not see
	status := evaluated.DeepCopy()
	if err := unstructured.SetNestedField(status.Object, int64(2), "status", "numberOfSelectedClusters"); err != nil {
		t.Fatal(err)
	}
	if _, err := placements.UpdateStatus(ctx, status, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	recorder := record.NewFakeRecorder(16)
	r := NewRemediator(benchEvaluator(admissionBenchEngine(t, 10)), dyn, recorder, false)
	r.pass(ctx, []map[string]any{evaluated.Object})
	r.mu.Lock()
	again := r.pending["payments/pl"]
	r.mu.Unlock()
	if !again {
		t.Fatal("a patch that conflicted with a status write was not queued again")
	}

	// the next pass evaluates the newer version and applies the answer
	current, err := placements.Get(ctx, "pl", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r.pass(ctx, []map[string]any{current.Object})
	after, err := placements.Get(ctx, "pl", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if after.GetAnnotations()[AppliedAnnotation] == "" {
		t.Errorf("the answer was not applied on the second pass: annotations %v", after.GetAnnotations())
	}
}
