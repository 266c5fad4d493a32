package lifecycle

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

func ready(replica int32, status metav1.ConditionStatus, reason string) kubewardenv1.ReplicaStatus {
	return kubewardenv1.ReplicaStatus{Replica: replica, Ready: status, Reason: reason, PolicyGeneration: 2}
}

func TestSetReplica_OneEntryPerReplica_OthersUntouched(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	var replicas []kubewardenv1.ReplicaStatus
	replicas, _ = setReplica(replicas, ready(0, metav1.ConditionTrue, "Loaded"), t0)
	replicas, _ = setReplica(replicas, ready(1, metav1.ConditionFalse, "LoadError"), t0)
	if len(replicas) != 2 {
		t.Fatalf("want 2 reports, got %+v", replicas)
	}

	replicas, changed := setReplica(replicas, ready(1, metav1.ConditionTrue, "Loaded"), t1)
	if !changed || len(replicas) != 2 {
		t.Fatalf("replica 1's report was not replaced in place: %+v", replicas)
	}
	if rs := findReplica(replicas, 1); rs.Ready != metav1.ConditionTrue || !rs.LastTransitionTime.Equal(&t1) {
		t.Fatalf("replica 1: %+v", rs)
	}
	if rs := findReplica(replicas, 0); rs.Ready != metav1.ConditionTrue || !rs.LastTransitionTime.Equal(&t0) {
		t.Fatalf("replica 0 was touched: %+v", rs)
	}

	if _, changed := setReplica(replicas, ready(0, metav1.ConditionTrue, "Loaded"), t1); changed {
		t.Fatal("an identical report counted as a change")
	}
	replicas, _ = setReplica(replicas, ready(0, metav1.ConditionTrue, "CompiledPrivately"), t1)
	if rs := findReplica(replicas, 0); rs.Reason != "CompiledPrivately" || !rs.LastTransitionTime.Equal(&t0) {
		t.Fatalf("same readiness, new reason: want the reason updated and the transition time kept, got %+v", rs)
	}
}

func TestSetCondition_OnePerType_OthersUntouched(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	scheduled := kubewardenv1.PolicyCondition{Type: kubewardenv1.ConditionScheduled, Status: metav1.ConditionTrue}
	initialized := kubewardenv1.PolicyCondition{Type: kubewardenv1.ConditionInitialized, Status: metav1.ConditionFalse, Reason: "PullError"}
	conds, _ := setCondition(nil, scheduled, t0)
	conds, _ = setCondition(conds, initialized, t0)
	initialized.Status, initialized.Reason = metav1.ConditionTrue, "Initialized"
	conds, changed := setCondition(conds, initialized, t1)
	if !changed || len(conds) != 2 {
		t.Fatalf("Initialized was not replaced in place: %+v", conds)
	}
	if c := findCondition(conds, scheduled); c == nil || !c.LastTransitionTime.Equal(&t0) {
		t.Fatalf("the controller's condition was touched: %+v", c)
	}
}

// Revisions written before replicas reported in status.replicas carry one Ready condition per
// replica; the apiserver now refuses repeated types, so the first write drops them.
func TestDropLegacyReady(t *testing.T) {
	conds := []kubewardenv1.PolicyCondition{
		{Type: kubewardenv1.ConditionScheduled, Status: metav1.ConditionTrue},
		{Type: kubewardenv1.ConditionReady, Status: metav1.ConditionTrue},
		{Type: kubewardenv1.ConditionInitialized, Status: metav1.ConditionTrue},
		{Type: kubewardenv1.ConditionReady, Status: metav1.ConditionFalse},
	}
	kept, dropped := dropLegacyReady(conds)
	if !dropped || len(kept) != 2 || kept[0].Type != kubewardenv1.ConditionScheduled || kept[1].Type != kubewardenv1.ConditionInitialized {
		t.Fatalf("kept %+v (dropped %v)", kept, dropped)
	}
	if _, dropped := dropLegacyReady(kept); dropped {
		t.Fatal("nothing to drop counted as a change")
	}
}

func ptr[T any](v T) *T { return &v }
