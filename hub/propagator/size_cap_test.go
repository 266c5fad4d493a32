package propagator_test

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub"
)

// A root whose replicas would take more of etcd than the hub allows one root is not propagated
// further: the root says why, no cluster gets a new replica, and the replicas it has stay.
func TestSizeCap_ARootOverTheCapReplicatesNothingMoreAndSaysWhy(t *testing.T) {
	e := newEnv(t)
	c1, c2, c3 := e.cluster("c1", nil), e.cluster("c2", nil), e.cluster("c3", nil)
	// Each replica is a little over 20 KiB: two fit under 50 KiB, three do not.
	e.startHubWith(hub.Options{MaxReplicatedBytes: 50 << 10})
	padding := strings.Repeat("x", 20<<10)
	tmpl := fmt.Sprintf(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"big"},"spec":{"severity":"low","object-templates":[],"padding":%q}}`, padding)
	e.create(&policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: "big", Namespace: e.ns},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Inform,
			PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: []byte(tmpl)}}}},
	})
	e.bind("b", "pl", policySubject("big"))
	e.decide("pl", 0, "", c1, c2)
	e.expectReplicas("big", c1, c2)

	e.decide("pl", 0, "", c1, c2, c3)
	e.eventually("the root says it is over the cap", func() (bool, string) {
		c := e.condition("big", "Propagated")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "ReplicatedSizeOverLimit" &&
			strings.Contains(c.Message, "3 clusters") && strings.Contains(c.Message, "50Ki"), fmt.Sprintf("condition %+v", c)
	})
	if got := e.replicaClusters("big"); fmt.Sprint(got) != fmt.Sprint([]string{c1, c2}) {
		t.Errorf("replicas on %v once over the cap, want the two that fit, %s and %s", got, c1, c2)
	}
	e.eventually("an Event says it", func() (bool, string) {
		return e.hasEvent("big", "ReplicatedSizeOverLimit", "3 clusters"), "no ReplicatedSizeOverLimit event"
	})

	// Back under the cap, it propagates again.
	e.decide("pl", 0, "", c1, c2)
	e.eventually("the root is propagated again", func() (bool, string) {
		c := e.condition("big", "Propagated")
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("condition %+v", c)
	})
	e.expectReplicas("big", c1, c2)
}
