package admission

import (
	"slices"
	"sync"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/reports"
)

// TestQueue_ResultsCarryThePolicysSeverityAndCategoryAtTheVersionTheyGive: an admission answer's
// result is classified by its policy's Kubewarden annotations, read when the answer is filed
// (here straight from the apiserver, as the policy server's informers serve them), and the report
// records the version that classification gives, the one the background scan computes, so the
// scan does not redo it. A monitor-mode answer is of severity info; a namespaced policy is looked
// up in the resource's namespace; an annotation change shows in the next answer's report.
var minimalPolicy = kubewardenv1.PolicySpec{Module: "registry://example/p:v1", Rules: []admissionregistrationv1.RuleWithOperations{{
	Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
	Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
}}}

func TestQueue_ResultsCarryThePolicysSeverityAndCategoryAtTheVersionTheyGive(t *testing.T) {
	c := newClient(t)
	ns := createNamespace(t, c, "classified")
	cap := &kubewardenv1.ClusterAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "classified-" + ns, Annotations: map[string]string{
		kubewardenv1.AnnotationSeverity: "high", kubewardenv1.AnnotationCategory: "Pod Security"}},
		Spec: kubewardenv1.ClusterAdmissionPolicySpec{PolicySpec: minimalPolicy}}
	ap := &kubewardenv1.AdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "local", Annotations: map[string]string{
		kubewardenv1.AnnotationCategory: "Team rules"}},
		Spec: minimalPolicy}
	for _, o := range []client.Object{cap, ap} {
		if err := c.Create(testCtx(t), o); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = c.Delete(testCtx(t), cap) })
	var mu sync.Mutex
	var looked []string
	q := startQueue(t, c, Options{Annotations: func(p reports.PolicyRef, namespace string) map[string]string {
		ref := kubewardenv1.ReportedReference(p.Name, p.Scope == reportsv1alpha1.PolicyScopeNamespaced, namespace)
		mu.Lock()
		looked = append(looked, ref.Kind+" "+ref.Namespace+"/"+ref.Name)
		mu.Unlock()
		var obj client.Object = &kubewardenv1.ClusterAdmissionPolicy{}
		if ref.Kind == kubewardenv1.KindAdmissionPolicy {
			obj = &kubewardenv1.AdmissionPolicy{}
		}
		if err := c.Get(testCtx(t), client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, obj); err != nil {
			return nil
		}
		return obj.GetAnnotations()
	}})
	cm := createConfigMap(t, c, ns, "settings")
	monitored := createConfigMap(t, c, ns, "monitored")
	local := reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeNamespaced, Name: "local"}

	q.Offer(Evaluation{Request: admissionRequest(t, "req-1", "UPDATE", cm), Policy: clusterPolicy(cap.Name), Version: "2", Result: Fail, Message: "no"})
	q.Offer(Evaluation{Request: admissionRequest(t, "req-2", "UPDATE", cm), Policy: local, Version: "1", Result: Pass})
	q.Offer(Evaluation{Request: admissionRequest(t, "req-3", "UPDATE", monitored), Policy: clusterPolicy(cap.Name), Version: "2", Monitor: true, Result: Fail})
	q.settle(t, 3)
	q.flush(t, 2)

	want := map[string]reports.Classification{cap.Name: {Severity: "high", Category: "Pod Security"}, "local": {Category: "Team rules"}}
	versions := map[string]string{cap.Name: reports.Version("2", cap.Annotations), "local": reports.Version("1", ap.Annotations)}
	r := getReport(t, c, cm)
	for _, res := range r.Spec.Results {
		if w := want[res.Policy]; res.Severity != w.Severity || res.Category != w.Category {
			t.Errorf("%s: severity %q category %q, want %+v", res.Policy, res.Severity, res.Category, w)
		}
		key, _ := reportsv1alpha1.PolicyLabelKey(reports.ScopeOf(&res), res.Policy)
		if got, w := r.Labels[key], versions[res.Policy]; got != w {
			t.Errorf("%s: version label %q, want %q", res.Policy, got, w)
		}
	}
	if len(r.Spec.Results) != 2 {
		t.Errorf("results %+v, want one per policy", r.Spec.Results)
	}
	if m := getReport(t, c, monitored).Spec.Results; len(m) != 1 || m[0].Severity != "info" || m[0].Category != "Pod Security" {
		t.Errorf("monitor-mode result %+v, want severity info and the category", m)
	}
	mu.Lock()
	if want := "AdmissionPolicy " + ns + "/local"; !slices.Contains(looked, want) {
		t.Errorf("looked up %q, want %q among them", looked, want)
	}
	mu.Unlock()

	cap.Annotations = map[string]string{kubewardenv1.AnnotationSeverity: "low"}
	if err := c.Update(testCtx(t), cap); err != nil {
		t.Fatal(err)
	}
	q.Offer(Evaluation{Request: admissionRequest(t, "req-4", "UPDATE", cm), Policy: clusterPolicy(cap.Name), Version: "2", Result: Fail, Message: "no"})
	q.settle(t, 4)
	q.flush(t, 3)
	r = getReport(t, c, cm)
	key, _ := reportsv1alpha1.PolicyLabelKey(reportsv1alpha1.PolicyScopeCluster, cap.Name)
	if got, w := r.Labels[key], reports.Version("2", cap.Annotations); got != w || w == versions[cap.Name] {
		t.Errorf("after the annotation change: version label %q, want %q", got, w)
	}
	for _, res := range r.Spec.Results {
		if res.Policy == cap.Name && (res.Severity != "low" || res.Category != "") {
			t.Errorf("after the annotation change: %+v, want severity low and no category", res)
		}
	}
}
