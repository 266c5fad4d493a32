package background

import (
	"encoding/json"
	"slices"
	"testing"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/reports"
)

var discovered = []resourceType{
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, kind: "ConfigMap", namespaced: true},
	{gvr: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, kind: "Namespace"},
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, kind: "Deployment", namespaced: true},
	{gvr: schema.GroupVersionResource{Group: "apps", Version: "v1beta1", Resource: "deployments"}, kind: "Deployment", namespaced: true},
	{gvr: schema.GroupVersionResource{Group: "reports.regent.dev", Version: "v1alpha1", Resource: "resourcereports"}, kind: "ResourceReport", namespaced: true},
}

func rule(ops []admissionregistrationv1.OperationType, groups, versions, resources []string) admissionregistrationv1.RuleWithOperations {
	return admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources}}
}

var (
	create = []admissionregistrationv1.OperationType{admissionregistrationv1.Create}
	update = []admissionregistrationv1.OperationType{admissionregistrationv1.Update}
	all    = []string{"*"}
)

func TestTypesOf_RulesNameKindsOncePerResourceNeverReportsOrSubresources(t *testing.T) {
	for _, tc := range []struct {
		name      string
		rules     []admissionregistrationv1.RuleWithOperations
		namespace string
		want      []string
	}{
		{"exact kind", []admissionregistrationv1.RuleWithOperations{rule(create, []string{""}, []string{"v1"}, []string{"configmaps"})}, "", []string{"/v1, Resource=configmaps"}},
		{"UPDATE only is not scanned", []admissionregistrationv1.RuleWithOperations{rule(update, []string{""}, []string{"v1"}, []string{"configmaps"})}, "", nil},
		{"wildcards: every kind once, preferred version, not the reports", []admissionregistrationv1.RuleWithOperations{rule([]admissionregistrationv1.OperationType{"*"}, all, all, all)}, "",
			[]string{"/v1, Resource=configmaps", "/v1, Resource=namespaces", "apps/v1, Resource=deployments"}},
		{"an older version named alone", []admissionregistrationv1.RuleWithOperations{rule(create, []string{"apps"}, []string{"v1beta1"}, []string{"deployments"})}, "", []string{"apps/v1beta1, Resource=deployments"}},
		{"subresources only", []admissionregistrationv1.RuleWithOperations{rule(create, all, all, []string{"deployments/scale"})}, "", nil},
		{"AdmissionPolicy: namespaced kinds only", []admissionregistrationv1.RuleWithOperations{rule(create, []string{""}, all, all)}, "team", []string{"/v1, Resource=configmaps"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &policy{namespace: tc.namespace, spec: kubewardenv1.PolicySpec{Rules: tc.rules}}
			var got []string
			for _, ty := range typesOf(p, discovered) {
				got = append(got, ty.gvr.String())
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPolicyMatches_SelectorsAsTheApiserverAppliesThem(t *testing.T) {
	sel := func(k, v string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
	}
	cm, ns := discovered[0], discovered[1]
	node := resourceType{gvr: schema.GroupVersionResource{Version: "v1", Resource: "nodes"}, kind: "Node"}
	prod := map[string]string{"env": "prod"}
	for _, tc := range []struct {
		name                string
		spec                kubewardenv1.PolicySpec
		namespace           string
		t                   resourceType
		objNS               string
		objLabels, nsLabels map[string]string
		want                bool
	}{
		{"no selector", kubewardenv1.PolicySpec{}, "", cm, "a", nil, nil, true},
		{"namespace selector, namespace labelled", kubewardenv1.PolicySpec{NamespaceSelector: sel("env", "prod")}, "", cm, "a", nil, prod, true},
		{"namespace selector, namespace not labelled", kubewardenv1.PolicySpec{NamespaceSelector: sel("env", "prod")}, "", cm, "a", nil, nil, false},
		{"namespace selector on a Namespace reads its own labels", kubewardenv1.PolicySpec{NamespaceSelector: sel("env", "prod")}, "", ns, "", prod, nil, true},
		{"namespace selector ignores other cluster-scoped kinds", kubewardenv1.PolicySpec{NamespaceSelector: sel("env", "prod")}, "", node, "", nil, nil, true},
		{"object selector", kubewardenv1.PolicySpec{ObjectSelector: sel("env", "prod")}, "", cm, "a", nil, prod, false},
		{"AdmissionPolicy, its namespace", kubewardenv1.PolicySpec{}, "a", cm, "a", nil, nil, true},
		{"AdmissionPolicy, another namespace", kubewardenv1.PolicySpec{}, "a", cm, "b", nil, nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := &policy{namespace: tc.namespace, spec: tc.spec}
			p.nsSel, _ = selector(tc.spec.NamespaceSelector)
			p.objSel, _ = selector(tc.spec.ObjectSelector)
			if got := p.matches(tc.t, tc.objNS, tc.objLabels, tc.nsLabels); got != tc.want {
				t.Errorf("matches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestScannedPolicies_ServingEnabledWithBackgroundAuditOnly(t *testing.T) {
	rev := func(kind, ns, name string, gen int64, enabled, serving, background bool) kubewardenv1.PolicyRevision {
		data, _ := json.Marshal(kubewardenv1.PolicySpec{BackgroundAudit: background})
		r := kubewardenv1.PolicyRevision{Spec: kubewardenv1.PolicyRevisionSpec{
			ObjectReference:  kubewardenv1.PolicyReference{Kind: kind, Namespace: ns, Name: name},
			PolicyGeneration: gen, Enabled: enabled, Data: runtime.RawExtension{Raw: data},
		}}
		if serving {
			r.Labels = map[string]string{kubewardenv1.ServingLabel: "true"}
		}
		return r
	}
	got, errs := scannedPolicies([]kubewardenv1.PolicyRevision{
		rev(kubewardenv1.KindClusterAdmissionPolicy, "", "scanned", 3, true, true, true),
		rev(kubewardenv1.KindClusterAdmissionPolicy, "", "scanned", 2, true, false, true),
		rev(kubewardenv1.KindClusterAdmissionPolicy, "", "no-background", 1, true, true, false),
		rev(kubewardenv1.KindClusterAdmissionPolicy, "", "disabled", 1, false, true, true),
		rev(kubewardenv1.KindAdmissionPolicy, "a", "same", 1, true, true, true),
		rev(kubewardenv1.KindAdmissionPolicy, "b", "same", 4, true, true, true),
	})
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	var ids []string
	for id, p := range got {
		ids = append(ids, string(id)+"@"+p.version())
	}
	slices.Sort(ids)
	if want := []string{"c/scanned@3", "n/a/same@1", "n/b/same@4"}; !slices.Equal(ids, want) {
		t.Errorf("got %v, want %v", ids, want)
	}
	if p := got["n/b/same"]; p.ref != (reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeNamespaced, Name: "same"}) || p.server != "namespaced-b-same" {
		t.Errorf("AdmissionPolicy: ref %+v server %s", p.ref, p.server)
	}
}

func TestOwnedResults_ScanResultsAlwaysKubewardenOnesOnlyOfAGonePolicy(t *testing.T) {
	ref := reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: "p"}
	scope := func(props map[string]string) map[string]string {
		props[reportsv1alpha1.PolicyScopeProperty] = string(reportsv1alpha1.PolicyScopeCluster)
		return props
	}
	scan := openreportsv1alpha1.ReportResult{Policy: "p", Source: ResultSource, Properties: scope(map[string]string{producedByProperty: producedByScan})}
	admission := openreportsv1alpha1.ReportResult{Policy: "p", Source: ResultSource, Properties: scope(map[string]string{})}
	config := openreportsv1alpha1.ReportResult{Policy: "p", Source: "configuration-policy", Properties: scope(map[string]string{})}
	other := openreportsv1alpha1.ReportResult{Policy: "q", Source: "configuration-policy"}
	for _, tc := range []struct {
		name    string
		results []openreportsv1alpha1.ReportResult
		gone    bool
		want    bool
	}{
		{"scan's result, backgroundAudit off", []openreportsv1alpha1.ReportResult{scan, other}, false, true},
		{"admission's result, backgroundAudit off", []openreportsv1alpha1.ReportResult{admission}, false, false},
		{"admission's result, policy gone", []openreportsv1alpha1.ReportResult{admission}, true, true},
		{"a ConfigurationPolicy's result of the same name", []openreportsv1alpha1.ReportResult{config}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ownedResults(tc.results, ref, tc.gone); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
