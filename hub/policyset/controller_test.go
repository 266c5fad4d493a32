package policyset_test

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub"
)

// TestPolicySetController_InTheHubFollowsReplicaCompliance runs the hub as `regent hub` does: the
// propagator places the set's members, a cluster reports, and the set's status follows through the
// watch on root policies; a member named but missing raises PolicyNotFound.
func TestPolicySetController_InTheHubFollowsReplicaCompliance(t *testing.T) {
	e := newEnv(t)
	cluster := e.ns + "-c1"
	e.create(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: cluster}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}})
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: cluster}})
	mgr, err := hub.NewManager(hubCluster.Config, hub.Options{MetricsBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	fleettest.StartManager(t, mgr)

	e.root("a", false)
	e.policySet("set", "a", "gone")
	e.bindSet("bind", "pl", "set")
	e.decide("pl", cluster)
	e.event("set", "PolicyNotFound", "Policy gone is in PolicySet set but could not be found in namespace "+e.ns)

	answer := func(state policyv1.ComplianceState) {
		t.Helper()
		rep := &policyv1.Policy{}
		key := types.NamespacedName{Namespace: cluster, Name: e.ns + ".a"}
		fleettest.Eventually(t, 60*time.Second, func() (bool, string) {
			err := e.c.Get(e.ctx, key, rep)
			return err == nil, fmt.Sprint("replica: ", err)
		})
		patch := fmt.Sprintf(`{"status":{"compliant":%q,"lastEvaluatedGeneration":%d}}`, state, rep.Generation)
		if err := e.c.Status().Patch(e.ctx, rep, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			t.Fatal(err)
		}
	}
	expect := func(state policyv1.ComplianceState) {
		t.Helper()
		fleettest.Eventually(t, 60*time.Second, func() (bool, string) {
			s := e.getSet("set").Status
			ok := s.Compliant == state && s.StatusMessage == "Deleted policies: gone" &&
				len(s.Placement) == 1 && s.Placement[0].PlacementBinding == "bind" && s.Placement[0].Placement == "pl"
			return ok, fmt.Sprintf("set status %+v, want %s", s, state)
		})
	}
	answer(policyv1.NonCompliant)
	expect(policyv1.NonCompliant)
	answer(policyv1.Compliant)
	expect(policyv1.Compliant)
}
