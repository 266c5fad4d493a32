package propagator

import (
	"context"
	"fmt"

	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
	"regent.dev/regent/hub/rollout"
)

// The readers below let tools that show a rollout (regent status) see it exactly as the
// propagator decides it, from any reader, instead of a second copy of these rules drifting apart.

// ClusterGroups reads the decision groups that select root, as the propagator does: its bindings,
// direct or through PolicySets, their Placements' groups, then one group per PlacementRule. A
// disabled root selects nothing.
func ClusterGroups(ctx context.Context, reader client.Reader, root *policyv1.Policy) (sdkv1beta1.ClusterGroupsMap, error) {
	if root.Spec.Disabled {
		return sdkv1beta1.ClusterGroupsMap{}, nil
	}
	bindings := &policyv1.PlacementBindingList{}
	if err := reader.List(ctx, bindings, client.InNamespace(root.Namespace)); err != nil {
		return nil, fmt.Errorf("list placement bindings in %s: %w", root.Namespace, err)
	}
	policySets := &policyv1beta1.PolicySetList{}
	if err := reader.List(ctx, policySets, client.InNamespace(root.Namespace)); err != nil {
		return nil, fmt.Errorf("list policy sets in %s: %w", root.Namespace, err)
	}
	sel := selectRoot(root, bindings.Items, policySets.Items)
	r := &Reconciler{Reader: reader}
	return r.groups(ctx, sel.Placements, sel.Rules)
}

// StrategyOf is the rollout strategy the propagator applies to root and how: progressively only
// when the root enforces and its strategy is not All.
func StrategyOf(root *policyv1.Policy) (clusterv1alpha1.RolloutStrategy, rollout.Mode) {
	return strategyOf(root)
}
