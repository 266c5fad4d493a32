package templatesync

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyv1 "regent.dev/regent/api/policy/v1"
)

func namespacedUnlessNamespace(gvk schema.GroupVersionKind) (bool, error) {
	if gvk.Kind == "Unknown" {
		return false, fmt.Errorf("Unknown is not served by this cluster")
	}
	return gvk.Kind != "Namespace", nil
}

func dep(apiVersion, kind, ns, name string) policyv1.PolicyDependency {
	d := policyv1.PolicyDependency{Name: name, Namespace: ns}
	d.APIVersion, d.Kind = apiVersion, kind
	return d
}

func TestResolve_MapsEachDependencyToItsObjectOnTheManagedCluster(t *testing.T) {
	for _, tc := range []struct {
		name string
		dep  policyv1.PolicyDependency
		want string
		err  bool
	}{
		{"policy defaults to the dependant's hub namespace", dep("", "Policy", "", "base"), "Policy cluster1/default.base", false},
		{"policy in another hub namespace", dep("policy.open-cluster-management.io/v1", "Policy", "infra", "base"), "Policy cluster1/infra.base", false},
		{"policy named in OCM's replica form <namespace>.<name>", dep("", "Policy", "", "infra.base"), "Policy cluster1/infra.base", false},
		{"config policy defaults to the cluster namespace", dep("", "ConfigurationPolicy", "", "cfg"), "ConfigurationPolicy cluster1/cfg", false},
		{"any namespaced kind keeps its namespace", dep("v1", "ConfigMap", "kube-system", "flag"), "ConfigMap kube-system/flag", false},
		{"cluster-scoped kinds have no namespace", dep("v1", "Namespace", "ignored", "prod"), "Namespace prod", false},
		{"other kinds need an apiVersion", dep("", "ConfigMap", "", "flag"), "", true},
		{"kinds the cluster does not serve", dep("example.com/v1", "Unknown", "", "x"), "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, err := resolve(tc.dep, "default", "cluster1", namespacedUnlessNamespace)
			if (err != nil) != tc.err {
				t.Fatalf("err = %v, want error %v", err, tc.err)
			}
			if err == nil && key.String() != tc.want {
				t.Fatalf("resolved to %q, want %q", key, tc.want)
			}
		})
	}
}

func withStatus(status map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"kind": "ConfigurationPolicy", "metadata": map[string]any{"name": "cfg", "generation": int64(3)}}}
	if status != nil {
		u.Object["status"] = status
	}
	return u
}

func TestUnmet_SaysWhyADependencyDoesNotHold(t *testing.T) {
	key := depKey{GVK: schema.GroupVersionKind{Kind: "ConfigurationPolicy"}, Namespace: "cluster1", Name: "cfg"}
	for _, tc := range []struct {
		name string
		want policyv1.ComplianceState
		obj  *unstructured.Unstructured
		msg  string
	}{
		{"missing", policyv1.Compliant, nil, "ConfigurationPolicy cluster1/cfg not found"},
		{"no status", policyv1.Compliant, withStatus(nil), "ConfigurationPolicy cluster1/cfg has no compliance status"},
		{"wrong compliance", policyv1.Compliant, withStatus(map[string]any{"compliant": "NonCompliant"}), "ConfigurationPolicy cluster1/cfg compliance is NonCompliant, want Compliant"},
		{"matching", policyv1.Compliant, withStatus(map[string]any{"compliant": "Compliant"}), ""},
		{"compliance defaults to Compliant", "", withStatus(map[string]any{"compliant": "Compliant"}), ""},
		{"waiting for NonCompliant", policyv1.NonCompliant, withStatus(map[string]any{"complianceState": "NonCompliant"}), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := unmet(key, tc.want, tc.obj); got != tc.msg {
				t.Fatalf("unmet = %q, want %q", got, tc.msg)
			}
		})
	}
}

func TestFindCycle_NamesTheLoopThroughTheStart(t *testing.T) {
	edges := map[string][]string{"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}}
	for start, want := range map[string]string{
		"a": "cycle: a → b → c → a",
		"c": "cycle: c → a → b → c",
		"d": "", // depends on a cycle without being in one
		"e": "cycle: e → e",
		"z": "",
	} {
		got := ""
		if c := findCycle(start, edges); c != nil {
			got = cycleMessage(c)
		}
		if got != want {
			t.Errorf("findCycle(%s) = %q, want %q", start, got, want)
		}
	}
}

func TestAggregate_UsesOCMPrecedence(t *testing.T) {
	C, N, P := policyv1.Compliant, policyv1.NonCompliant, policyv1.Pending
	for _, tc := range []struct {
		in   []policyv1.ComplianceState
		want policyv1.ComplianceState
	}{
		{nil, ""},
		{[]policyv1.ComplianceState{C, C}, C},
		{[]policyv1.ComplianceState{C, ""}, ""},
		{[]policyv1.ComplianceState{C, "", P}, P},
		{[]policyv1.ComplianceState{P, N, C}, N},
	} {
		if got := aggregate(tc.in); got != tc.want {
			t.Errorf("aggregate(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestEvaluatedCurrent_ComparesTheEvaluatedGeneration(t *testing.T) {
	for _, tc := range []struct {
		status map[string]any
		want   bool
	}{
		{map[string]any{"compliant": "Compliant", "lastEvaluatedGeneration": int64(3)}, true},
		{map[string]any{"compliant": "Compliant", "lastEvaluatedGeneration": int64(2)}, false},
		{map[string]any{"compliant": "Compliant", "observedGeneration": int64(3)}, true},
		{map[string]any{"compliant": "Compliant"}, true},
		{nil, false},
	} {
		if got := evaluatedCurrent(withStatus(tc.status)); got != tc.want {
			t.Errorf("evaluatedCurrent(%v) = %v, want %v", tc.status, got, tc.want)
		}
	}
}

func TestWithTransition_KeepsTenNewestAndSkipsRepeats(t *testing.T) {
	now := metav1.NewTime(time.Unix(0, 0))
	var d *policyv1.DetailsPerTemplate
	for i := 0; i < 12; i++ {
		state := policyv1.Compliant
		if i%2 == 1 {
			state = policyv1.NonCompliant
		}
		next, changed := withTransition(d, "cfg", state, fmt.Sprint(i), "", now)
		if !changed {
			t.Fatalf("transition %d not recorded", i)
		}
		d = next
	}
	if len(d.History) != historyLength || d.History[0].Message != "11" {
		t.Fatalf("history has %d entries, newest %q; want %d, newest \"11\"", len(d.History), d.History[0].Message, historyLength)
	}
	if _, changed := withTransition(d, "cfg", d.ComplianceState, "11", "", now); changed {
		t.Fatal("an unchanged state and message was recorded again")
	}
	if _, changed := withTransition(nil, "cfg", "", "not reported yet", "", now); changed {
		t.Fatal("a template without a compliance got a history entry")
	}
}

func TestContains_IgnoresFieldsTheApiserverAdded(t *testing.T) {
	have := map[string]any{"spec": map[string]any{"remediationAction": "inform", "object-templates": []any{
		map[string]any{"complianceType": "musthave", "recordDiff": "None"}}}}
	if !contains(have, map[string]any{"spec": map[string]any{"object-templates": []any{map[string]any{"complianceType": "musthave"}}}}) {
		t.Error("a defaulted field inside a list item counted as drift")
	}
	if contains(have, map[string]any{"spec": map[string]any{"remediationAction": "enforce"}}) {
		t.Error("a changed value was not noticed")
	}
	if contains(have, map[string]any{"spec": map[string]any{"object-templates": []any{map[string]any{}, map[string]any{}}}}) {
		t.Error("a list of a different length was not noticed")
	}
}

func TestAdmissionPolicies_AreCompliantWhileServingTheirNewestGeneration(t *testing.T) {
	policy := func(phase string, serving int64) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "policies.kubewarden.io/v1", "kind": "ClusterAdmissionPolicy",
			"metadata": map[string]any{"name": "p", "generation": int64(2)},
			"status":   map[string]any{"phase": phase, "servingGeneration": serving}}}
		return u
	}
	for _, tc := range []struct {
		phase   string
		serving int64
		state   policyv1.ComplianceState
		current bool
	}{
		{"Active", 2, policyv1.Compliant, true},
		{"Pending", 1, "", false},
		{"Failed", 1, policyv1.NonCompliant, true},
	} {
		obj := policy(tc.phase, tc.serving)
		state, _ := complianceOf(obj)
		if state != tc.state || evaluatedCurrent(obj) != tc.current {
			t.Errorf("%s serving %d: compliance %q current %v, want %q %v", tc.phase, tc.serving, state, evaluatedCurrent(obj), tc.state, tc.current)
		}
	}
}

func TestAdmissionPolicyMessage_ShowsEachReplica(t *testing.T) {
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "policies.kubewarden.io/v1", "kind": "ClusterAdmissionPolicy",
		"metadata": map[string]any{"name": "no-privileged", "generation": int64(2)},
		"status": map[string]any{"phase": "Failed", "servingGeneration": int64(1), "conditions": []any{
			map[string]any{"type": "Initialized", "status": "True"},
			map[string]any{"type": "Ready", "status": "False", "reason": "LoadError", "message": "replica 1: bad settings"},
		}, "replicas": []any{
			map[string]any{"replica": int64(0), "ready": "True", "policyGeneration": int64(2)},
			map[string]any{"replica": int64(1), "ready": "False", "reason": "LoadError", "message": "bad settings", "policyGeneration": int64(2)},
		}}}}
	got := statusMessage(obj, policyv1.NonCompliant)
	want := "NonCompliant; ClusterAdmissionPolicy no-privileged is Failed, serving generation 1 of 2; Initialized=True; Ready=False (LoadError: replica 1: bad settings); Ready on replica 0=True; Ready on replica 1=False (LoadError: bad settings)"
	if got != want {
		t.Fatalf("message\n got %q\nwant %q", got, want)
	}
}

func TestTemplateOwner_AnotherPolicysObjectIsNeverThisPolicys(t *testing.T) {
	p := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster1", Name: "team-a.p"}}
	owned := func(kind, apiVersion, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: apiVersion, Kind: kind, Name: name, Controller: ptr(true)}})
		return u
	}
	labelled := func(policy, ns string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetLabels(map[string]string{PolicyLabel: policy, ClusterNamespaceLabel: ns})
		return u
	}
	for _, tc := range []struct {
		name         string
		obj          *unstructured.Unstructured
		owner, rival string
	}{
		{"controlled by this policy", owned("Policy", "policy.open-cluster-management.io/v1", "team-a.p"), "", ""},
		{"controlled by another root's policy", owned("Policy", "policy.open-cluster-management.io/v1", "team-b.p"), "policy team-b.p", "team-b.p"},
		{"controlled by something else", owned("Deployment", "apps/v1", "team-a.p"), "Deployment team-a.p", ""},
		{"cluster-scoped, labelled for this policy", labelled("team-a.p", "cluster1"), "", ""},
		{"cluster-scoped, labelled for another root's policy", labelled("team-b.p", "cluster1"), "policy team-b.p", "team-b.p"},
		{"cluster-scoped, labelled for a policy of another cluster namespace", labelled("team-a.p", "cluster2"), "policy cluster2/team-a.p", ""},
		{"no policy at all", &unstructured.Unstructured{}, "no Policy", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			owner, rival := templateOwner(tc.obj, p)
			if owner != tc.owner || rival != tc.rival {
				t.Errorf("owner %q rival %q, want %q %q", owner, rival, tc.owner, tc.rival)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }
