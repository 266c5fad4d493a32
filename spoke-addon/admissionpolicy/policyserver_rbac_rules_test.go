package admissionpolicy

import (
	"fmt"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

func TestReplicaLeaseNames_EveryReplicaAndEveryLeaseStillThere(t *testing.T) {
	for _, tc := range []struct {
		name     string
		replicas int32
		existing []string
		want     []string
	}{
		{"none", 0, nil, nil},
		{"one per replica", 2, nil, leaseNames(0, 1)},
		{"a scaled-down replica's Lease stays named until it is deleted", 1, leaseNames(2, 0), leaseNames(0, 2)},
		{"sorted by number, not by text", 11, nil, leaseNames(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10)},
		{"other servers' and odd names are not ours", 0, []string{
			"regent-policy-server-a", "regent-policy-server-b-replica-0", "regent-policy-server-a-replica-1-replica-0",
			"regent-policy-server-a-replica-01", "regent-policy-server-a-replica--1", "regent-policy-server-a-replica-x",
		}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := replicaLeaseNames("a", tc.replicas, tc.existing)
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func leaseNames(replicas ...int) []string {
	var out []string
	for _, n := range replicas {
		out = append(out, fmt.Sprintf("regent-policy-server-a-replica-%d", n))
	}
	return out
}

func TestReplicaRules_NoReplicaLeaseMeansNoDeleteAtAll(t *testing.T) {
	for _, leases := range [][]string{nil, {"regent-policy-server-a-replica-0"}} {
		rules := replicaRules("a", leases)
		for _, r := range rules {
			if slices.Contains(r.Verbs, "delete") && len(r.ResourceNames) == 0 {
				t.Errorf("with replica Leases %v: %+v deletes every Lease", leases, r)
			}
			// Only these are unnamed: revisions are many and their names unknown in advance, and
			// a create cannot be named.
			unnamedOK := r.Resources[0] == "policyrevisions" || r.Resources[0] == "policyrevisions/status" ||
				(r.Resources[0] == "leases" && slices.Equal(r.Verbs, []string{"create"}))
			if len(r.ResourceNames) == 0 && !unnamedOK {
				t.Errorf("%+v is not limited by name", r)
			}
			for _, v := range r.Verbs {
				if v == "*" || v == "patch" || v == "deletecollection" {
					t.Errorf("%+v grants %s", r, v)
				}
			}
		}
		if hasDelete := slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.Verbs, "delete") }); hasDelete != (len(leases) > 0) {
			t.Errorf("with replica Leases %v: delete rule present = %v", leases, hasDelete)
		}
	}
}

func TestContextRules_SubjectAccessReviewsAlwaysReadsGroupedAndSorted(t *testing.T) {
	got := contextRules([]schema.GroupResource{
		{Group: "apps", Resource: "deployments"}, {Resource: "namespaces"}, {Group: "apps", Resource: "daemonsets"},
		{Resource: "namespaces"}, {Resource: "configmaps"},
	})
	want := []rbacv1.PolicyRule{
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"reports.regent.dev"}, Resources: []string{"resourcereports", "clusterresourcereports"}, Verbs: []string{"get", "create", "update"}},
		{APIGroups: []string{"policies.kubewarden.io"}, Resources: []string{"admissionpolicies", "admissionpolicygroups", "clusteradmissionpolicies", "clusteradmissionpolicygroups"}, Verbs: []string{"list", "watch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps", "namespaces"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apps"}, Resources: []string{"daemonsets", "deployments"}, Verbs: []string{"get", "list", "watch"}},
	}
	if hashOf(got) != hashOf(want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	if none := contextRules(nil); len(none) != 3 || none[0].Resources[0] != "subjectaccessreviews" || none[1].Resources[0] != "resourcereports" || none[2].Resources[0] != "admissionpolicies" {
		t.Errorf("no context-aware policy: %+v, want the SubjectAccessReview, report and policy rules alone", none)
	}
}

func TestResolveResources_UnknownKindsAreReportedAndSkipped(t *testing.T) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, meta.RESTScopeRoot)
	mapper.Add(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, meta.RESTScopeNamespace)
	wants := []wantedResource{
		{policy: "p", ContextAwareResource: kubewardenv1.ContextAwareResource{APIVersion: "apps/v1", Kind: "Deployment"}},
		{policy: "p", ContextAwareResource: kubewardenv1.ContextAwareResource{APIVersion: "v1", Kind: "Namespace"}},
		{policy: "q", ContextAwareResource: kubewardenv1.ContextAwareResource{APIVersion: "v1", Kind: "Namespace"}},
		{policy: "q", ContextAwareResource: kubewardenv1.ContextAwareResource{APIVersion: "example.com/v1", Kind: "Widget"}},
		{policy: "q", ContextAwareResource: kubewardenv1.ContextAwareResource{APIVersion: "a/b/c", Kind: "Bad"}},
	}
	resources, unknown := resolveResources(mapper, wants)
	if want := []schema.GroupResource{{Group: "apps", Resource: "deployments"}, {Resource: "namespaces"}}; !slices.Equal(resources, want) {
		t.Errorf("resources = %v, want %v", resources, want)
	}
	if len(unknown) != 2 || !strings.HasPrefix(unknown[0], "ClusterAdmissionPolicy q: a/b/c Bad") ||
		!strings.HasPrefix(unknown[1], "ClusterAdmissionPolicy q: example.com/v1 Widget") {
		t.Errorf("unknown = %q", unknown)
	}
}

func TestBackgroundScanRules_ListAndWatchWhatScannedPoliciesNameWriteOnlyReportsAndEvents(t *testing.T) {
	rule := func(ops []admissionregistrationv1.OperationType, groups, resources []string) admissionregistrationv1.RuleWithOperations {
		return admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: groups, Resources: resources}}
	}
	create := []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	specs := func(rules ...admissionregistrationv1.RuleWithOperations) []kubewardenv1.PolicySpec {
		return []kubewardenv1.PolicySpec{{Rules: rules}}
	}
	scanned := specs(
		rule(create, []string{"apps"}, []string{"deployments", "deployments/scale"}),
		rule([]admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}, []string{""}, []string{"pods", "configmaps"}),
		rule([]admissionregistrationv1.OperationType{admissionregistrationv1.Update}, []string{""}, []string{"secrets"}),
		rule(create, []string{"apps"}, []string{"deployments"}),
	)
	scanned = append(scanned, kubewardenv1.PolicySpec{NamespaceSelector: &metav1.LabelSelector{}})
	got := backgroundScanRules(scanned)
	fixed := backgroundScanRules(nil)
	want := append(slices.Clone(fixed),
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"configmaps", "pods"}, Verbs: []string{"list", "watch"}},
		rbacv1.PolicyRule{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"list", "watch"}},
	)
	if hashOf(got) != hashOf(want) {
		t.Errorf("got %+v\nwant %+v", got, want)
	}
	for _, r := range fixed {
		if slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") || slices.Contains(r.Verbs, "*") || slices.Contains(r.Resources, "namespaces") {
			t.Errorf("%+v: granted without a policy that needs it", r)
		}
		if slices.Contains(r.Verbs, "get") && !slices.Contains(r.Resources, "resourcereports") {
			t.Errorf("%+v: get beyond the reports", r)
		}
		if slices.ContainsFunc(r.Verbs, func(v string) bool { return v == "create" || v == "update" || v == "delete" }) {
			for _, res := range r.Resources {
				if res != "resourcereports" && res != "clusterresourcereports" && res != "events" {
					t.Errorf("%+v writes %s", r, res)
				}
			}
		}
	}
	if all := backgroundScanRules(specs(rule(create, []string{"*"}, []string{"*/*"}))); !slices.ContainsFunc(all, func(r rbacv1.PolicyRule) bool {
		return r.APIGroups[0] == "*" && r.Resources[0] == "*" && !slices.Contains(r.Verbs, "get")
	}) {
		t.Errorf("a policy on every kind: %+v, want list and watch of every kind", all)
	}
}

func TestLeaderRules_TheKeyByNameAndTheLeasesOfLeadingNothingOfAReplica(t *testing.T) {
	rules := leaderRules("a")
	var key, leases bool
	for _, r := range rules {
		unnamedOK := r.Resources[0] == "policyrevisions" || r.Resources[0] == "policyrevisions/status" ||
			(r.Resources[0] == "leases" && slices.Equal(r.Verbs, []string{"create"}))
		if len(r.ResourceNames) == 0 && !unnamedOK {
			t.Errorf("%+v is not limited by name", r)
		}
		if slices.Contains(r.Verbs, "delete") {
			t.Errorf("%+v: the leader deletes nothing", r)
		}
		key = key || slices.Equal(r.ResourceNames, []string{"regent-policy-server-a-signing-key"})
		if r.Resources[0] == "leases" && len(r.ResourceNames) > 0 {
			leases = slices.Equal(r.ResourceNames, []string{"regent-policy-server-a", "regent-policy-server-a-replica-leader"}) &&
				slices.Equal(r.Verbs, []string{"get", "update"})
		}
	}
	if !key || !leases {
		t.Errorf("leader rules %+v: want the signing key by name and get/update of the leader and leader address Leases", rules)
	}
	for _, r := range replicaRules("a", []string{"regent-policy-server-a-replica-0"}) {
		if slices.Contains(r.ResourceNames, "regent-policy-server-a-signing-key") ||
			(slices.Contains(r.ResourceNames, "regent-policy-server-a") && !slices.Equal(r.Verbs, []string{"get"})) {
			t.Errorf("replica rule %+v grants the leader's", r)
		}
	}
}
