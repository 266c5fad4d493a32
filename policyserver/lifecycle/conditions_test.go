package lifecycle

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

func ready(replica int32, status metav1.ConditionStatus, reason string) kubewardenv1.PolicyCondition {
	return kubewardenv1.PolicyCondition{Type: kubewardenv1.ConditionReady, Status: status, Reason: reason, Replica: &replica, PolicyGeneration: 2}
}

func TestSetCondition_OneSlotPerTypeAndReplica_OthersUntouched(t *testing.T) {
	t0, t1 := metav1.NewTime(time.Unix(100, 0)), metav1.NewTime(time.Unix(200, 0))
	scheduled := kubewardenv1.PolicyCondition{Type: kubewardenv1.ConditionScheduled, Status: metav1.ConditionTrue}
	conds, _ := setCondition(nil, scheduled, t0)
	conds, _ = setCondition(conds, ready(0, metav1.ConditionTrue, "Loaded"), t0)
	conds, _ = setCondition(conds, ready(1, metav1.ConditionFalse, "LoadError"), t0)
	if len(conds) != 3 {
		t.Fatalf("want 3 conditions, got %+v", conds)
	}

	conds, changed := setCondition(conds, ready(1, metav1.ConditionTrue, "Loaded"), t1)
	if !changed || len(conds) != 3 {
		t.Fatalf("replica 1's condition was not replaced in place: %+v", conds)
	}
	if c := findCondition(conds, ready(1, "", "")); c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Equal(&t1) {
		t.Fatalf("replica 1: %+v", c)
	}
	if c := findCondition(conds, ready(0, "", "")); c.Status != metav1.ConditionTrue || !c.LastTransitionTime.Equal(&t0) {
		t.Fatalf("replica 0 was touched: %+v", c)
	}
	if findCondition(conds, scheduled) == nil {
		t.Fatal("the controller's condition was lost")
	}

	if _, changed := setCondition(conds, ready(0, metav1.ConditionTrue, "Loaded"), t1); changed {
		t.Fatal("an identical condition counted as a change")
	}
	conds, _ = setCondition(conds, kubewardenv1.PolicyCondition{Type: kubewardenv1.ConditionReady, Status: metav1.ConditionTrue, Reason: "CompiledPrivately", Replica: ptr(int32(0)), PolicyGeneration: 2}, t1)
	if c := findCondition(conds, ready(0, "", "")); c.Reason != "CompiledPrivately" || !c.LastTransitionTime.Equal(&t0) {
		t.Fatalf("same status, new reason: want the reason updated and the transition time kept, got %+v", c)
	}
}

func ptr[T any](v T) *T { return &v }
