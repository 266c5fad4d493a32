package propagator_test

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// plant creates in namespace what looks like a replica of root (OCM's three labels), as anyone
// allowed to write Policies there could.
func (e *env) plant(namespace, name, root string) *policyv1.Policy {
	e.t.Helper()
	tmpl := `{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"planted"},"spec":{"remediationAction":"enforce","object-templates":[]}}`
	p := &policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{
			propagator.RootPolicyLabel: root, propagator.ClusterNameLabel: namespace, propagator.ClusterNSLabel: namespace}},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Enforce,
			PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: []byte(tmpl)}}}},
	}
	e.create(p)
	return p
}

func (e *env) gone(namespace, name string) {
	e.t.Helper()
	e.eventually(namespace+"/"+name+" deleted", func() (bool, string) {
		err := e.c.Get(e.ctx, client.ObjectKey{Namespace: namespace, Name: name}, &policyv1.Policy{})
		return apierrors.IsNotFound(err), fmt.Sprintf("get: %v", err)
	})
}

// eventIn waits for an Event in namespace about object name with reason, whose note mentions each
// of mentions.
func (e *env) eventIn(namespace, name, reason string, mentions ...string) {
	e.t.Helper()
	e.eventually(reason+" event on "+namespace+"/"+name, func() (bool, string) {
		list := &eventsv1.EventList{}
		if err := e.c.List(e.ctx, list, client.InNamespace(namespace)); err != nil {
			return false, err.Error()
		}
		var seen []string
	events:
		for _, ev := range list.Items {
			seen = append(seen, ev.Reason+": "+ev.Note)
			if ev.Regarding.Name != name || ev.Reason != reason {
				continue
			}
			for _, m := range mentions {
				if !strings.Contains(ev.Note, m) {
					continue events
				}
			}
			return true, ""
		}
		return false, fmt.Sprintf("events %q", seen)
	})
}

func TestOrphans_PlantedReplicaInAClusterNamespaceIsDeletedWithAnEvent(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1", nil)
	// The same fake replica outside any cluster namespace: OCM leaves it (a hub managed by another
	// hub holds replicas of roots that live there).
	elsewhere := e.ns + "-not-a-cluster"
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: elsewhere}})
	e.startHub()

	e.plant(elsewhere, "default.fake", "default.fake")
	e.plant(c1, "default.fake", "default.fake")
	e.gone(c1, "default.fake")
	e.eventIn(c1, "default.fake", "OrphanedReplicaDeleted", "root policy default/fake does not exist")
	// Both fakes name the same root, so the reconcile that deleted the one saw the other.
	if err := e.c.Get(e.ctx, client.ObjectKey{Namespace: elsewhere, Name: "default.fake"}, &policyv1.Policy{}); err != nil {
		t.Errorf("replica-looking policy outside cluster namespaces: %v, want it left alone", err)
	}
}

func TestOrphans_ReplicaNotNamedAfterItsRootIsDeleted(t *testing.T) {
	e := newEnv(t)
	c1, c2 := e.cluster("c1", nil), e.cluster("c2", nil)
	e.startHub()
	e.rootPolicy("p", policyv1.Inform, nil)
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1)
	e.expectReplicas("p", c1)

	// It claims the real root, in a namespace the root is not placed in, under another name.
	e.plant(c2, "impostor", e.ns+".p")
	e.gone(c2, "impostor")
	e.eventIn(c2, "impostor", "OrphanedReplicaDeleted", "its name is not "+e.ns+".p")
	e.expectReplicas("p", c1)
}

func TestOrphans_RootInAClusterNamespaceIsDeletedAndNeverPropagated(t *testing.T) {
	e := newEnv(t)
	c1, c2 := e.cluster("c1", nil), e.cluster("c2", nil)
	e.startHub()
	// A root with its binding and placement decision, all in c1's namespace, selecting c2.
	tmpl := `{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":"sneaky"},"spec":{"object-templates":[]}}`
	e.create(&policyv1.PlacementBinding{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: c1},
		PlacementRef: policyv1.PlacementSubject{APIGroup: "cluster.open-cluster-management.io", Kind: "Placement", Name: "pl"},
		Subjects:     []policyv1.Subject{policySubject("sneaky")}})
	d := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: "pl-decision-0", Namespace: c1, Labels: map[string]string{
		clusterv1beta1.PlacementLabel: "pl", clusterv1beta1.DecisionGroupIndexLabel: "0"}}}
	e.create(d)
	d.Status.Decisions = []clusterv1beta1.ClusterDecision{{ClusterName: c2}}
	if err := e.c.Status().Update(e.ctx, d); err != nil {
		t.Fatal(err)
	}
	e.create(&policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "sneaky", Namespace: c1},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Enforce,
			PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: []byte(tmpl)}}}}})
	e.gone(c1, "sneaky")
	e.eventIn(c1, "sneaky", "RootPolicyInClusterNamespace", "belongs to managed cluster "+c1)
	list := &policyv1.PolicyList{}
	if err := e.c.List(e.ctx, list, client.MatchingLabels{propagator.RootPolicyLabel: c1 + ".sneaky"}); err != nil {
		t.Fatal(err)
	}
	if len(list.Items) != 0 {
		t.Errorf("the root in a cluster namespace was propagated to %d clusters (%s first)", len(list.Items), list.Items[0].Namespace)
	}
}
