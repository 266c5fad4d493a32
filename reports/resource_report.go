package reports

import (
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
)

// Resource identifies the evaluated resource. Namespace is empty for a cluster-scoped one.
type Resource struct {
	APIVersion string
	Kind       string
	Namespace  string
	Name       string
	UID        types.UID
}

// PolicyRef names a policy and its scope: a namespaced policy's results aggregate into
// "pol-<name>", a cluster-wide one's into "cpol-<name>".
type PolicyRef struct {
	Scope reportsv1alpha1.PolicyScope
	Name  string
}

// PolicyResults are the results of one policy, evaluated at Version (the policy's generation or
// resourceVersion), against the resource. Empty Results still records that the policy was
// evaluated at Version.
type PolicyResults struct {
	Policy  PolicyRef
	Version string
	Results []openreportsv1alpha1.ReportResult
}

// Desired returns the report for res once the results of every policy in set replace that
// policy's earlier results and the policies in drop lose theirs; results of other policies are
// kept from current, which is nil when the resource has no report yet. Every result gets the
// policy's name and, for a namespaced policy, its scope property; its subject is the report's
// owner (Subject), so results name no other. current is not modified.
func Desired(current reportsv1alpha1.Object, res Resource, source reportsv1alpha1.Source, set []PolicyResults, drop []PolicyRef) reportsv1alpha1.Object {
	out := newReport(res.Namespace)
	if current != nil {
		out.SetLabels(copyMap(current.GetLabels()))
		out.SetAnnotations(copyMap(current.GetAnnotations()))
		out.ReportSpec().Results = append([]openreportsv1alpha1.ReportResult(nil), current.ReportSpec().Results...)
	}
	out.SetName(string(res.UID))
	out.SetNamespace(res.Namespace)
	labels, annotations := ensure(out.GetLabels()), ensure(out.GetAnnotations())
	gv, _ := schema.ParseGroupVersion(res.APIVersion)
	labels[reportsv1alpha1.LabelResourceUID] = reportsv1alpha1.LabelSafe(string(res.UID))
	labels[reportsv1alpha1.LabelResourceGroup] = reportsv1alpha1.LabelSafe(gv.Group)
	labels[reportsv1alpha1.LabelResourceVersion] = reportsv1alpha1.LabelSafe(gv.Version)
	labels[reportsv1alpha1.LabelResourceKind] = reportsv1alpha1.LabelSafe(res.Kind)
	labels[reportsv1alpha1.LabelSource] = string(source)
	out.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: res.APIVersion, Kind: res.Kind, Name: res.Name, UID: res.UID}})

	spec := out.ReportSpec()
	for _, p := range drop {
		spec.Results = withoutPolicy(spec.Results, p)
		key, _ := reportsv1alpha1.PolicyLabelKey(p.Scope, p.Name)
		delete(labels, key)
		delete(annotations, key)
	}
	for _, p := range set {
		spec.Results = withoutPolicy(spec.Results, p.Policy)
		key, hashed := reportsv1alpha1.PolicyLabelKey(p.Policy.Scope, p.Policy.Name)
		labels[key] = reportsv1alpha1.LabelSafe(p.Version)
		delete(annotations, key)
		if hashed {
			annotations[key] = p.Policy.Name
		}
		for _, r := range p.Results {
			r = *r.DeepCopy()
			r.Policy = p.Policy.Name
			// Cluster scope is what a result without the property means, and the subject is
			// the report's owner: neither is repeated in every result, which keeps a report of
			// five results within half an etcd page (see docs/reports.md).
			delete(r.Properties, reportsv1alpha1.PolicyScopeProperty)
			if scopeOrCluster(p.Policy.Scope) == reportsv1alpha1.PolicyScopeNamespaced {
				r.Properties = ensure(r.Properties)
				r.Properties[reportsv1alpha1.PolicyScopeProperty] = string(reportsv1alpha1.PolicyScopeNamespaced)
			}
			if len(r.Properties) == 0 {
				r.Properties = nil
			}
			if len(r.Subjects) == 1 && r.Subjects[0].UID == res.UID {
				r.Subjects = nil
			}
			spec.Results = append(spec.Results, r)
		}
	}
	SortResults(spec.Results)
	out.SetLabels(labels)
	if len(annotations) == 0 {
		annotations = nil
	}
	out.SetAnnotations(annotations)
	return out
}

// Subject is the resource a per-resource report's results are about: its owner.
func Subject(r reportsv1alpha1.Object) (corev1.ObjectReference, bool) {
	owners := r.GetOwnerReferences()
	if len(owners) == 0 {
		return corev1.ObjectReference{}, false
	}
	o := owners[0]
	return corev1.ObjectReference{APIVersion: o.APIVersion, Kind: o.Kind, Namespace: r.GetNamespace(), Name: o.Name, UID: o.UID}, true
}

// WithSubjects returns r's results as an aggregated Report holds them: each naming its subject.
func WithSubjects(r reportsv1alpha1.Object) []openreportsv1alpha1.ReportResult {
	results := r.ReportSpec().Results
	subject, ok := Subject(r)
	if !ok {
		return results
	}
	out := make([]openreportsv1alpha1.ReportResult, len(results))
	for i, res := range results {
		if len(res.Subjects) == 0 && res.ResourceSelector == nil {
			res.Subjects = []corev1.ObjectReference{subject}
		}
		out[i] = res
	}
	return out
}

// ScopeOf returns the policy scope a result records; a result without one is cluster-wide.
func ScopeOf(r *openreportsv1alpha1.ReportResult) reportsv1alpha1.PolicyScope {
	return scopeOrCluster(reportsv1alpha1.PolicyScope(r.Properties[reportsv1alpha1.PolicyScopeProperty]))
}

func scopeOrCluster(s reportsv1alpha1.PolicyScope) reportsv1alpha1.PolicyScope {
	if s == reportsv1alpha1.PolicyScopeNamespaced {
		return s
	}
	return reportsv1alpha1.PolicyScopeCluster
}

func newReport(namespace string) reportsv1alpha1.Object {
	if namespace == "" {
		return &reportsv1alpha1.ClusterResourceReport{}
	}
	return &reportsv1alpha1.ResourceReport{}
}

func withoutPolicy(results []openreportsv1alpha1.ReportResult, p PolicyRef) []openreportsv1alpha1.ReportResult {
	out := results[:0]
	for i := range results {
		if results[i].Policy == p.Name && ScopeOf(&results[i]) == scopeOrCluster(p.Scope) {
			continue
		}
		out = append(out, results[i])
	}
	return out
}

func ensure(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func copyMap(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
