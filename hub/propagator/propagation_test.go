package propagator_test

import (
	"fmt"
	"sort"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub/propagator"
)

func (e *env) replicaClusters(root string) []string {
	var out []string
	for c := range e.replicas(root) {
		out = append(out, c)
	}
	sort.Strings(out)
	return out
}

func (e *env) expectReplicas(root string, clusters ...string) {
	e.t.Helper()
	sort.Strings(clusters)
	want := fmt.Sprint(clusters)
	e.eventually("replicas of "+root, func() (bool, string) {
		got := fmt.Sprint(e.replicaClusters(root))
		return got == want, "replicas on " + got + ", want " + want
	})
}

func TestPropagation_ReplicatesToSelectedClustersAndCleansUp(t *testing.T) {
	e := newEnv(t)
	c1, c2 := e.cluster("c1", nil), e.cluster("c2", nil)
	e.startHub()
	e.rootPolicy("p", policyv1.Inform, nil)
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1, c2)
	e.expectReplicas("p", c1, c2)

	rep := e.replicas("p")[c1]
	for label, want := range map[string]string{propagator.RootPolicyLabel: e.ns + ".p", propagator.ClusterNameLabel: c1,
		propagator.ClusterNSLabel: c1, "team": "platform"} {
		if rep.Labels[label] != want {
			t.Errorf("replica label %s = %q, want %q", label, rep.Labels[label], want)
		}
	}
	e.eventually("root status", func() (bool, string) {
		r := e.root("p")
		return len(r.Status.Status) == 2 && len(r.Status.Placement) == 1 && r.Status.Placement[0].Placement == "pl",
			fmt.Sprintf("status %+v", r.Status)
	})

	// Nothing changed: another reconcile (a no-op edit of the binding triggers one) writes nothing.
	e.eventually("replica rollout status", func() (bool, string) {
		r := e.replicas("p")[c2]
		return r.EffectiveRolloutStatus() == policyv1.RolloutProgressing, "replica status " + string(r.EffectiveRolloutStatus())
	})
	rootRV, repRV := e.root("p").ResourceVersion, e.replicas("p")[c2].ResourceVersion
	b := &policyv1.PlacementBinding{ObjectMeta: e.objectMeta("b")}
	fleettest.Edit(t, e.c, b, func(b *policyv1.PlacementBinding) { b.Annotations = map[string]string{"touched": "yes"} })
	e.decide("pl", 0, "", c1, c2) // and a decision write that changes nothing
	e.answer("p", c1, policyv1.Compliant)
	e.eventually("compliance of c1 on the root", func() (bool, string) {
		r := e.root("p")
		return r.Status.Status[0].ComplianceState == policyv1.Compliant, fmt.Sprintf("%+v", r.Status.Status[0])
	})
	if got := e.replicas("p")[c2].ResourceVersion; got != repRV {
		t.Errorf("replica on %s rewritten without change: resourceVersion %s, was %s", c2, got, repRV)
	}
	if e.root("p").ResourceVersion == rootRV {
		t.Errorf("root status did not take c1's compliance")
	}

	// A replica edited on the hub is put back.
	fleettest.Edit(t, e.c, e.replicas("p")[c2], func(r *policyv1.Policy) { r.Spec.RemediationAction = policyv1.Enforce })
	e.eventually("tampered replica put back", func() (bool, string) {
		r := e.replicas("p")[c2]
		return r.Spec.RemediationAction == policyv1.Inform, "remediation " + string(r.Spec.RemediationAction)
	})

	// A cluster leaving the decisions loses its replica.
	e.decide("pl", 0, "", c1)
	e.expectReplicas("p", c1)

	// Disabled: every replica goes; enabled again: they come back.
	e.edit("p", func(r *policyv1.Policy) { r.Spec.Disabled = true })
	e.expectReplicas("p")
	e.edit("p", func(r *policyv1.Policy) { r.Spec.Disabled = false })
	e.expectReplicas("p", c1)

	// The binding deleted: replicas go.
	if err := e.c.Delete(e.ctx, b); err != nil {
		t.Fatal(err)
	}
	e.expectReplicas("p")

	// Bound through a policy set instead.
	e.create(&policyv1beta1.PolicySet{ObjectMeta: e.objectMeta("set"), Spec: policyv1beta1.PolicySetSpec{Policies: []policyv1beta1.NonEmptyString{"p"}}})
	e.bind("b-set", "pl", policyv1.Subject{APIGroup: policyv1.GroupVersion.Group, Kind: "PolicySet", Name: "set"})
	e.expectReplicas("p", c1)
	e.eventually("root status names the set", func() (bool, string) {
		r := e.root("p")
		return len(r.Status.Placement) == 1 && r.Status.Placement[0].PolicySet == "set", fmt.Sprintf("%+v", r.Status.Placement)
	})

	// The root deleted: replicas go.
	if err := e.c.Delete(e.ctx, e.root("p")); err != nil {
		t.Fatal(err)
	}
	e.expectReplicas("p")
}

func TestPropagation_CopyPolicyMetadataFalseCopiesOnlyFrameworkMetadata(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1", nil)
	e.startHub()
	e.rootPolicy("p", policyv1.Inform, nil)
	e.edit("p", func(p *policyv1.Policy) {
		p.Spec.CopyPolicyMetadata = ptr.To(false)
		p.Labels["policy.open-cluster-management.io/kept"] = "yes"
	})
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1)
	e.expectReplicas("p", c1)
	e.eventually("labels", func() (bool, string) {
		l := e.replicas("p")[c1].Labels
		return l["team"] == "" && l["policy.open-cluster-management.io/kept"] == "yes", fmt.Sprint(l)
	})
}

func TestPropagation_OrphanReplicaOfAMissingRootIsDeleted(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1", nil)
	orphan := &policyv1.Policy{ObjectMeta: e.objectMeta("x")}
	orphan.Name, orphan.Namespace = e.ns+".gone", c1
	orphan.Labels = map[string]string{propagator.RootPolicyLabel: e.ns + ".gone"}
	orphan.Spec.PolicyTemplates = []*policyv1.PolicyTemplate{}
	e.create(orphan)
	e.startHub()
	e.eventually("orphan deleted", func() (bool, string) {
		err := e.c.Get(e.ctx, types.NamespacedName{Namespace: c1, Name: orphan.Name}, &policyv1.Policy{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

func TestPropagation_UnreadableDecisionIsSaidOnTheRoot(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1", nil)
	e.startHub()
	e.rootPolicy("p", policyv1.Inform, nil)
	e.bind("b", "pl", policySubject("p"))
	bad := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: "pl-decision-x", Namespace: e.ns,
		Labels: map[string]string{clusterv1beta1.PlacementLabel: "pl"}}}
	e.create(bad)
	e.eventually("Propagated condition", func() (bool, string) {
		c := meta.FindStatusCondition(e.root("p").Status.Conditions, "Propagated")
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == "PlacementUnreadable", fmt.Sprintf("%+v", c)
	})
	if err := e.c.Delete(e.ctx, bad); err != nil {
		t.Fatal(err)
	}
	e.decide("pl", 0, "", c1)
	e.expectReplicas("p", c1)
	e.eventually("Propagated condition", func() (bool, string) {
		c := meta.FindStatusCondition(e.root("p").Status.Conditions, "Propagated")
		return c != nil && c.Status == metav1.ConditionTrue, fmt.Sprintf("%+v", c)
	})
}
