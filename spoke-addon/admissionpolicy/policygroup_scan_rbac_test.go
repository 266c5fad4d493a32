package admissionpolicy

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
)

// A group with backgroundAudit is scanned like a policy, so its server's leader may list and
// watch what the group's rules name, and the grant goes when the group does.
func TestPolicyServerRBAC_TheBackgroundScanListsWhatAGroupNames(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "grbac"},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 1}}
	if err := c.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	waitRBAC(t, c, "grbac", metav1.ConditionTrue, "Granted")
	leader := serviceAccountName("grbac") + "-leader"
	if serviceAccountMay(t, c, leader, "list", "", "configmaps", "", "") {
		t.Fatal("the leader lists configmaps before any policy names them")
	}
	g := &kubewardenv1.AdmissionPolicyGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "scanned"},
		Spec: groupSpec("grbac", "scanned", "a()", map[string]string{"a": "file:///policies/v1.wasm"})}
	if err := c.Create(ctx, g); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the leader lists configmaps for the group's scan", func() bool {
		return serviceAccountMay(t, c, leader, "list", "", "configmaps", "", "")
	})
	if err := c.Delete(ctx, g); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the grant goes with the group", func() bool {
		return !serviceAccountMay(t, c, leader, "list", "", "configmaps", "", "")
	})
}
