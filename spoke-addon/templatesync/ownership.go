package templatesync

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// templateOwner tells whom an existing template object belongs to when it is not p: the policy
// of its controller ownerReference (namespaced templates), else the policy its labels name
// (cluster-scoped ones), as OCM's template sync decides. owner describes it for messages ("" when
// the object is p's); rival is the name of the other Policy when it is one in p's namespace, to
// tell it too. Two roots shipping a template of the same name must not take it from each other:
// the first keeps it, the other is refused.
func templateOwner(existing *unstructured.Unstructured, p *policyv1.Policy) (owner, rival string) {
	if ref := metav1.GetControllerOfNoCopy(existing); ref != nil {
		gv, _ := schema.ParseGroupVersion(ref.APIVersion)
		if gv.Group != PolicyGroup || ref.Kind != "Policy" {
			return fmt.Sprintf("%s %s", ref.Kind, ref.Name), ""
		}
		if ref.Name == p.Name {
			return "", ""
		}
		return "policy " + ref.Name, ref.Name
	}
	labels := existing.GetLabels()
	policy, ns := labels[PolicyLabel], labels[ClusterNamespaceLabel]
	switch {
	case policy == "":
		return "no Policy", ""
	case policy == p.Name && (ns == "" || ns == p.Namespace):
		return "", ""
	case ns != "" && ns != p.Namespace:
		return "policy " + ns + "/" + policy, ""
	}
	return "policy " + policy, policy
}

// collisionMessage is OCM's message for a template whose object another policy owns.
func collisionMessage(obj *unstructured.Unstructured, owner string) string {
	if owner == "no Policy" {
		return fmt.Sprintf("template-error; Template name must be unique. Policy template with kind: %s name: %s already exists outside of a Policy",
			obj.GetKind(), obj.GetName())
	}
	return fmt.Sprintf("template-error; Template name must be unique. Policy template with kind: %s name: %s already exists in %s",
		obj.GetKind(), obj.GetName(), owner)
}
