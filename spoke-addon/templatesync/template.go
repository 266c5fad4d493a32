package templatesync

import (
	"encoding/json"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// Labels that tie a template object to its policy, as OCM sets them.
const (
	PolicyLabel           = "policy.open-cluster-management.io/policy"
	ClusterNameLabel      = "policy.open-cluster-management.io/cluster-name"
	ClusterNamespaceLabel = "policy.open-cluster-management.io/cluster-namespace"
)

// templateObject turns a policy template into the object to create: the objectDefinition with
// the policy's remediationAction overriding its own (OCM's policy kinds), labelled for its policy, owned by it when
// both are namespaced (a cluster-scoped object cannot have a namespaced owner), and placed in the
// cluster namespace when namespaced.
func templateObject(p *policyv1.Policy, tmpl *policyv1.PolicyTemplate, namespaced bool) (*unstructured.Unstructured, error) {
	obj := &unstructured.Unstructured{}
	if err := json.Unmarshal(tmpl.ObjectDefinition.Raw, &obj.Object); err != nil {
		return nil, fmt.Errorf("template objectDefinition: %w", err)
	}
	if obj.GetKind() == "" || obj.GetName() == "" {
		return nil, fmt.Errorf("template objectDefinition needs kind and metadata.name")
	}
	// Only OCM's policy kinds have a remediationAction; writing one into another kind (an
	// admission policy) would be pruned and look like drift forever.
	if p.Spec.RemediationAction != "" && obj.GroupVersionKind().Group == PolicyGroup {
		if _, hasSpec := obj.Object["spec"].(map[string]any); hasSpec {
			_ = unstructured.SetNestedField(obj.Object, string(p.Spec.RemediationAction), "spec", "remediationAction")
		}
	}
	labels := obj.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[PolicyLabel] = p.Name
	labels[ClusterNameLabel] = p.Namespace
	labels[ClusterNamespaceLabel] = p.Namespace
	obj.SetLabels(labels)
	if namespaced {
		obj.SetNamespace(p.Namespace)
		obj.SetOwnerReferences([]metav1.OwnerReference{*metav1.NewControllerRef(p, policyv1.GroupVersion.WithKind("Policy"))})
	} else {
		obj.SetNamespace("")
	}
	return obj, nil
}

// needsUpdate is true when current lacks something of want's spec, labels or annotations.
// Fields other controllers add (status, defaults) do not count.
func needsUpdate(current, want *unstructured.Unstructured) bool {
	for k, v := range want.Object {
		switch k {
		case "metadata", "status", "apiVersion", "kind":
			continue
		}
		if !contains(current.Object[k], v) {
			return true
		}
	}
	for k, v := range want.GetLabels() {
		if current.GetLabels()[k] != v {
			return true
		}
	}
	for k, v := range want.GetAnnotations() {
		if current.GetAnnotations()[k] != v {
			return true
		}
	}
	return false
}

// contains is true when have holds everything in want: maps and lists recursively, so fields the
// apiserver defaulted inside list items do not count as drift; other values must be equal.
func contains(have, want any) bool {
	if wl, ok := want.([]any); ok {
		hl, ok := have.([]any)
		if !ok || len(hl) != len(wl) {
			return false
		}
		for i := range wl {
			if !contains(hl[i], wl[i]) {
				return false
			}
		}
		return true
	}
	wm, ok := want.(map[string]any)
	if !ok {
		return jsonEqual(have, want)
	}
	hm, ok := have.(map[string]any)
	if !ok {
		return false
	}
	for k, v := range wm {
		if !contains(hm[k], v) {
			return false
		}
	}
	return true
}

func jsonEqual(a, b any) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}
