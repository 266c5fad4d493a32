package templatesync

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// PolicyGroup is the API group of OCM's policy kinds.
const PolicyGroup = "policy.open-cluster-management.io"

// depKey identifies an object a template depends on, as it exists on the managed cluster.
type depKey struct {
	GVK       schema.GroupVersionKind
	Namespace string
	Name      string
}

func (k depKey) String() string {
	if k.Namespace == "" {
		return k.GVK.Kind + " " + k.Name
	}
	return k.GVK.Kind + " " + k.Namespace + "/" + k.Name
}

// policyKindVersions lets users name OCM's policy kinds without an apiVersion, as OCM does.
var policyKindVersions = map[string]string{
	"Policy": "v1", "ConfigurationPolicy": "v1", "CertificatePolicy": "v1", "OperatorPolicy": "v1beta1",
	"PolicySet": "v1beta1",
}

// resolve maps a dependency to the object it means on the managed cluster. A Policy is named by
// its hub name (namespace defaulting to the dependant's hub namespace) and lives on the cluster as
// the replica <namespace>.<name> in the cluster namespace; other kinds default to the cluster
// namespace, where templates are created. namespaced says whether a kind is namespaced.
func resolve(dep policyv1.PolicyDependency, rootNamespace, clusterNamespace string, namespaced func(schema.GroupVersionKind) (bool, error)) (depKey, error) {
	gv, err := schema.ParseGroupVersion(dep.APIVersion)
	if err != nil {
		return depKey{}, fmt.Errorf("apiVersion %q: %w", dep.APIVersion, err)
	}
	if dep.APIVersion == "" {
		v, ok := policyKindVersions[dep.Kind]
		if !ok {
			return depKey{}, fmt.Errorf("%s %s: apiVersion is required for kinds other than OCM's policy kinds", dep.Kind, dep.Name)
		}
		gv = schema.GroupVersion{Group: PolicyGroup, Version: v}
	}
	gvk := gv.WithKind(dep.Kind)
	if gvk.Group == PolicyGroup && gvk.Kind == "Policy" {
		ns := dep.Namespace
		if ns == "" && strings.Count(dep.Name, ".") == 1 {
			// OCM's propagator writes Policy dependencies in replicas as "<namespace>.<name>" with
			// no namespace, and takes a name of that form as already qualified: so does Regent.
			return depKey{GVK: gvk, Namespace: clusterNamespace, Name: dep.Name}, nil
		}
		if ns == "" {
			ns = rootNamespace
		}
		return depKey{GVK: gvk, Namespace: clusterNamespace, Name: ns + "." + dep.Name}, nil
	}
	isNamespaced, err := namespaced(gvk)
	if err != nil {
		return depKey{}, err
	}
	key := depKey{GVK: gvk, Name: dep.Name}
	if isNamespaced {
		key.Namespace = dep.Namespace
		if key.Namespace == "" {
			key.Namespace = clusterNamespace
		}
	}
	return key, nil
}

// KubewardenGroup is the API group of the admission policy kinds.
const KubewardenGroup = "policies.kubewarden.io"

// complianceOf reads an object's compliance the way OCM's policy kinds report it: status.compliant,
// or status.complianceState. An admission policy is compliant when it is serving its newest
// generation (phase Active) and not when that generation failed to load.
func complianceOf(obj *unstructured.Unstructured) (policyv1.ComplianceState, bool) {
	for _, field := range []string{"compliant", "complianceState"} {
		if v, ok, _ := unstructured.NestedString(obj.Object, "status", field); ok && v != "" {
			return policyv1.ComplianceState(v), true
		}
	}
	if obj.GroupVersionKind().Group == KubewardenGroup {
		switch phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase"); phase {
		case "Active":
			return policyv1.Compliant, true
		case "Failed":
			return policyv1.NonCompliant, true
		}
	}
	return "", false
}

// unmet says why a dependency does not hold, or "" when it does. obj is nil when not found.
func unmet(key depKey, want policyv1.ComplianceState, obj *unstructured.Unstructured) string {
	if want == "" {
		want = policyv1.Compliant
	}
	if obj == nil {
		return key.String() + " not found"
	}
	got, ok := complianceOf(obj)
	if !ok {
		return key.String() + " has no compliance status"
	}
	if got != want {
		return fmt.Sprintf("%s compliance is %s, want %s", key, got, want)
	}
	return ""
}

// pendingMessage is the status message of a template waiting for its dependencies.
func pendingMessage(reasons []string) string {
	return "Dependencies were not satisfied: " + strings.Join(reasons, "; ")
}
