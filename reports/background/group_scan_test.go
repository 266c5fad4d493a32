package background

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
)

// A ClusterAdmissionPolicyGroup and a ClusterAdmissionPolicy of one name are two policies: each
// has its own results, and deleting the group takes only the group's.
func TestScan_GroupResultsLandApartFromASameNamedClusterPolicy(t *testing.T) {
	e := newEnv(t)
	ns := createNamespace(t, e.c, "app", map[string]string{"scope": e.ns})
	createConfigMap(t, e.c, ns, "a", map[string]string{"team": "x"})
	e.start(t, 0)
	e.publish(t, e.cluster("team"), 1, configMapPolicy("team", e.ns))
	e.publish(t, e.clusterGroup("team"), 3, configMapPolicy("owner", e.ns))
	e.reportsAre(t, ns, "a: group/team=fail@3 team=pass@1")

	var rep reportsv1alpha1.ResourceReportList
	if err := e.c.List(ctx(t), &rep, client.InNamespace(ns)); err != nil || len(rep.Items) != 1 {
		t.Fatalf("%d reports, %v", len(rep.Items), err)
	}
	for _, r := range rep.Items[0].Spec.Results {
		if r.Properties[reportsv1alpha1.PolicyScopeProperty] != "" {
			t.Errorf("result of %s has scope %q; a cluster-wide group's results are cluster-scoped", r.Policy, r.Properties[reportsv1alpha1.PolicyScopeProperty])
		}
	}

	e.unpublish(t, e.clusterGroup("team"), 0)
	e.reportsAre(t, ns, "a: team=pass@1")
}

// An AdmissionPolicyGroup, like an AdmissionPolicy, covers only its own namespace, and its
// results are namespaced.
func TestScan_AdmissionPolicyGroupCoversOnlyItsNamespace(t *testing.T) {
	e := newEnv(t)
	mine := createNamespace(t, e.c, "mine", map[string]string{"scope": e.ns})
	other := createNamespace(t, e.c, "other", map[string]string{"scope": e.ns})
	createConfigMap(t, e.c, mine, "a", nil)
	createConfigMap(t, e.c, other, "a", nil)
	e.start(t, 0)
	e.publish(t, namespacedGroup(mine, "team"), 1, configMapPolicy("team", e.ns))
	e.publish(t, e.cluster("everywhere"), 1, configMapPolicy("team", e.ns))
	e.reportsAre(t, mine, "a: everywhere=fail@1 group/team=fail@1")
	e.reportsAre(t, other, "a: everywhere=fail@1")

	var rep reportsv1alpha1.ResourceReportList
	if err := e.c.List(ctx(t), &rep, client.InNamespace(mine)); err != nil || len(rep.Items) != 1 {
		t.Fatalf("%d reports, %v", len(rep.Items), err)
	}
	for _, r := range rep.Items[0].Spec.Results {
		if r.Policy == "group/team" && reportsv1alpha1.PolicyScope(r.Properties[reportsv1alpha1.PolicyScopeProperty]) != reportsv1alpha1.PolicyScopeNamespaced {
			t.Errorf("group result %+v is not namespaced", r)
		}
	}
}

// Events about a group's scan are on the group.
func TestOwnerObject_IsTheGroup(t *testing.T) {
	for kind, want := range map[string]client.Object{
		kubewardenv1.KindAdmissionPolicyGroup:        &kubewardenv1.AdmissionPolicyGroup{},
		kubewardenv1.KindClusterAdmissionPolicyGroup: &kubewardenv1.ClusterAdmissionPolicyGroup{},
	} {
		got := ownerObject(kubewardenv1.PolicyReference{Kind: kind, Name: "g", Namespace: "n"})
		if gotT, wantT := typeName(got), typeName(want); gotT != wantT || got.GetName() != "g" {
			t.Errorf("%s: owner %s %s, want %s", kind, gotT, got.GetName(), wantT)
		}
	}
}

func typeName(o client.Object) string {
	switch o.(type) {
	case *kubewardenv1.AdmissionPolicyGroup:
		return "AdmissionPolicyGroup"
	case *kubewardenv1.ClusterAdmissionPolicyGroup:
		return "ClusterAdmissionPolicyGroup"
	case *kubewardenv1.AdmissionPolicy:
		return "AdmissionPolicy"
	}
	return "ClusterAdmissionPolicy"
}
