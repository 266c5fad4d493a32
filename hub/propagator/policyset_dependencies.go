package propagator

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
)

// policySetDependencyIndex indexes roots by the PolicySets their dependencies name
// ("<namespace>/<name>"), so a change of a set's membership re-propagates its dependants.
const policySetDependencyIndex = "regent.dev/policyset-dependency"

// A managed cluster has no PolicySets, only replicas. As OCM's propagator does, a dependency on a
// set is therefore replaced, in the replicas, by one dependency per member policy with the same
// compliance: the set's dependency holds on a cluster exactly when every member's replica there has
// that compliance (a member not placed on the cluster is not found, so the dependency waits). A set
// that does not exist is left as written: the cluster then reports it as not found.

// isPolicySetDependency says whether dep names an OCM PolicySet. Like the spoke, Regent lets the
// apiVersion of OCM's own kinds be omitted.
func isPolicySetDependency(dep policyv1.PolicyDependency) bool {
	return dep.Kind == "PolicySet" && (dep.APIVersion == "" || dep.APIVersion == policyv1beta1.GroupVersion.String())
}

// policySetKey is the set a dependency of root names; its namespace defaults to the root's.
func policySetKey(root *policyv1.Policy, dep policyv1.PolicyDependency) types.NamespacedName {
	ns := dep.Namespace
	if ns == "" {
		ns = root.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: dep.Name}
}

// policySetDependencies lists the sets root depends on, in its dependencies and its templates'
// extra dependencies.
func policySetDependencies(root *policyv1.Policy) []types.NamespacedName {
	var out []types.NamespacedName
	add := func(deps []policyv1.PolicyDependency) {
		for _, d := range deps {
			if isPolicySetDependency(d) {
				out = append(out, policySetKey(root, d))
			}
		}
	}
	add(root.Spec.Dependencies)
	for _, t := range root.Spec.PolicyTemplates {
		if t != nil {
			add(t.ExtraDependencies)
		}
	}
	return out
}

// indexPolicySetDependencies is the index function of policySetDependencyIndex.
func indexPolicySetDependencies(o client.Object) []string {
	p, ok := o.(*policyv1.Policy)
	if !ok || isReplica(p) {
		return nil
	}
	var out []string
	for _, k := range policySetDependencies(p) {
		out = append(out, k.String())
	}
	return out
}

// readPolicySetMembers reads the members of the sets root depends on; a set that does not exist
// has no entry.
func (r *Reconciler) readPolicySetMembers(ctx context.Context, root *policyv1.Policy) (map[types.NamespacedName][]string, error) {
	keys := policySetDependencies(root)
	if len(keys) == 0 {
		return nil, nil
	}
	out := make(map[types.NamespacedName][]string, len(keys))
	for _, k := range keys {
		set := &policyv1beta1.PolicySet{}
		if err := r.Reader.Get(ctx, k, set); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("get policy set %s a dependency names: %w", k, err)
		}
		members := make([]string, 0, len(set.Spec.Policies))
		for _, p := range set.Spec.Policies {
			members = append(members, string(p))
		}
		out[k] = members
	}
	return out, nil
}

// expandPolicySetDependencies returns spec with every dependency on a known set replaced by
// dependencies on its members, or nil when there is nothing to replace (spec is then used as is).
func expandPolicySetDependencies(root *policyv1.Policy, spec *policyv1.PolicySpec, members map[types.NamespacedName][]string) *policyv1.PolicySpec {
	if len(members) == 0 {
		return nil
	}
	expand := func(deps []policyv1.PolicyDependency) []policyv1.PolicyDependency {
		var out []policyv1.PolicyDependency
		for _, d := range deps {
			key := policySetKey(root, d)
			names, known := members[key]
			if !isPolicySetDependency(d) || !known {
				out = append(out, d)
				continue
			}
			for _, name := range names {
				out = append(out, policyv1.PolicyDependency{
					TypeMeta:   metav1.TypeMeta{APIVersion: policyv1.GroupVersion.String(), Kind: "Policy"},
					Namespace:  key.Namespace,
					Name:       name,
					Compliance: d.Compliance,
				})
			}
		}
		return out
	}
	out := spec.DeepCopy()
	out.Dependencies = expand(out.Dependencies)
	for _, t := range out.PolicyTemplates {
		if t != nil {
			t.ExtraDependencies = expand(t.ExtraDependencies)
		}
	}
	return out
}

// policySetToDependants enqueues the roots whose dependencies name the set.
func (r *Reconciler) policySetToDependants(ctx context.Context, set client.Object) []reconcile.Request {
	roots := &policyv1.PolicyList{}
	key := types.NamespacedName{Namespace: set.GetNamespace(), Name: set.GetName()}.String()
	if err := r.Reader.List(ctx, roots, client.MatchingFields{policySetDependencyIndex: key}); err != nil {
		return nil
	}
	out := make([]reconcile.Request, 0, len(roots.Items))
	for i := range roots.Items {
		out = append(out, request(roots.Items[i].Namespace, roots.Items[i].Name))
	}
	return out
}
