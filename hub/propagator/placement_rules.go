package propagator

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// PlacementRules (apps.open-cluster-management.io/v1) are OCM's deprecated way to choose clusters,
// still bound by much existing policy YAML and by OCM's own propagator tests. As OCM's propagator
// does, Regent takes a rule's status.decisions as its clusters; they form one decision group, so
// a rollout goes over them as over a Placement without decision strategy. Regent does not own
// the kind: it is read as unstructured, and only when a hub serves it.

var placementRuleGVK = schema.GroupVersionKind{Group: "apps.open-cluster-management.io", Version: "v1", Kind: "PlacementRule"}

const (
	placementRuleKind   = "PlacementRule"
	deprecatedCondition = "PlacementRuleDeprecated"
)

// ruleGroups reads the decisions of each PlacementRule as one decision group, in the order given.
// A rule that does not exist, or a hub that does not serve the kind, selects no cluster.
func ruleGroups(ctx context.Context, reader client.Reader, rules []types.NamespacedName) (sdkv1beta1.ClusterGroupsMap, error) {
	out := sdkv1beta1.ClusterGroupsMap{}
	for _, name := range rules {
		rule := &unstructured.Unstructured{}
		rule.SetGroupVersionKind(placementRuleGVK)
		if err := reader.Get(ctx, name, rule); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				continue
			}
			return nil, fmt.Errorf("get placement rule %s: %w", name, err)
		}
		decisions, _, err := unstructured.NestedSlice(rule.Object, "status", "decisions")
		if err != nil {
			return nil, fmt.Errorf("decisions of placement rule %s: %w", name, err)
		}
		clusters := sets.New[string]()
		for _, d := range decisions {
			if m, ok := d.(map[string]any); ok {
				if c, ok := m["clusterName"].(string); ok && c != "" {
					clusters.Insert(c)
				}
			}
		}
		if clusters.Len() > 0 {
			out[sdkv1beta1.GroupKey{GroupIndex: int32(len(out))}] = clusters
		}
	}
	return out, nil
}

// deprecationConditionFor notes on the root that it is bound through PlacementRules, which OCM
// deprecated in favour of Placements; nil when it is not.
func deprecationConditionFor(generation int64, sel selection) *metav1.Condition {
	if len(sel.RuleBindings) == 0 {
		return nil
	}
	return &metav1.Condition{Type: deprecatedCondition, Status: metav1.ConditionTrue, ObservedGeneration: generation,
		Reason: "PlacementRuleDeprecated",
		Message: fmt.Sprintf("bound through a PlacementRule (apps.open-cluster-management.io/v1, deprecated) by %s: its decisions are used, as one decision group; bind a Placement (cluster.open-cluster-management.io/v1beta1) instead",
			strings.Join(sel.RuleBindings, ", "))}
}

// servesPlacementRules says whether the hub serves the PlacementRule kind; without it there is
// nothing to watch (a binding to a rule then selects no cluster).
func servesPlacementRules(mgr ctrl.Manager) bool {
	_, err := mgr.GetRESTMapper().RESTMapping(placementRuleGVK.GroupKind(), placementRuleGVK.Version)
	return err == nil
}

// ruleToRoots enqueues the roots bound to a PlacementRule.
func (r *Reconciler) ruleToRoots(ctx context.Context, o client.Object) []reconcile.Request {
	bindings := &policyv1.PlacementBindingList{}
	if err := r.Reader.List(ctx, bindings, client.InNamespace(o.GetNamespace()), client.MatchingFields{placementIndex: o.GetName()}); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range bindings.Items {
		if bindings.Items[i].PlacementRef.Kind == placementRuleKind {
			out = append(out, r.bindingToRoots(ctx, &bindings.Items[i])...)
		}
	}
	return out
}
