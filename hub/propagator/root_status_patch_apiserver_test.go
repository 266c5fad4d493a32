package propagator_test

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// The hub writes a root's status as a JSON patch of the lines that changed and reads back only the
// root's metadata. On a real apiserver: a root without status gets one, a turn's lines land where
// they belong, the resourceVersion the hub keeps is the server's, and a status whose lines were
// moved behind the hub's back (its tests fail) is replaced whole by the one the hub computed.
func TestRootStatusPatch_OnTheApiserver(t *testing.T) {
	e := newEnv(t)
	root := e.rootPolicy("p", policyv1.Inform, nil)
	at := metav1.NewTime(time.Now().Truncate(time.Second))
	status := &policyv1.PolicyStatus{RolloutStatus: policyv1.RolloutProgressing}
	for i := range 5 {
		name := fmt.Sprintf("%s-c%d", e.ns, i)
		status.Status = append(status.Status, &policyv1.CompliancePerClusterStatus{ClusterName: name, ClusterNamespace: name,
			RolloutStatus: policyv1.RolloutToApply, LastTransitionTime: &at})
	}
	expect := func(step string, want *policyv1.PolicyStatus) {
		t.Helper()
		got := e.root("p")
		if got.ResourceVersion != root.ResourceVersion {
			t.Errorf("%s: hub keeps resourceVersion %s, server has %s", step, root.ResourceVersion, got.ResourceVersion)
		}
		if !equality.Semantic.DeepEqual(&got.Status, want) {
			t.Errorf("%s: server's status\n%+v\nwant\n%+v", step, got.Status, want)
		}
	}

	if err := propagator.PatchRootStatus(e.ctx, e.c, root, status.DeepCopy()); err != nil {
		t.Fatalf("first status: %v", err)
	}
	expect("first status", status)

	turn := status.DeepCopy()
	turn.Status[3].RolloutStatus = policyv1.RolloutProgressing
	meta.SetStatusCondition(&turn.Conditions, metav1.Condition{Type: "Rollout", Status: metav1.ConditionFalse, Reason: "Progressing", Message: "0 of 5", LastTransitionTime: at})
	if err := propagator.PatchRootStatus(e.ctx, e.c, root, turn.DeepCopy()); err != nil {
		t.Fatalf("a turn: %v", err)
	}
	expect("a turn", turn)

	// Someone reverses the lines on the server; the hub's copy still has them in order.
	moved := e.root("p")
	for i, j := 0, len(moved.Status.Status)-1; i < j; i, j = i+1, j-1 {
		moved.Status.Status[i], moved.Status.Status[j] = moved.Status.Status[j], moved.Status.Status[i]
	}
	if err := e.c.Status().Update(e.ctx, moved); err != nil {
		t.Fatal(err)
	}
	next := turn.DeepCopy()
	next.Status[0].RolloutStatus = policyv1.RolloutProgressing
	stale := root.DeepCopy()
	if err := propagator.PatchRootStatus(e.ctx, e.c, stale, next.DeepCopy()); err != nil {
		t.Fatalf("over moved lines: %v", err)
	}
	root = stale
	expect("over moved lines", next)
}
