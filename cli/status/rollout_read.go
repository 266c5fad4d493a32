package status

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// ReadRollout reads root namespace/name and the decisions of its placements from the hub and
// builds its rollout view at now.
func ReadRollout(ctx context.Context, c client.Reader, namespace, name string, now time.Time) (Rollout, error) {
	root := &policyv1.Policy{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, root); err != nil {
		return Rollout{}, fmt.Errorf("get policy %s/%s: %w", namespace, name, err)
	}
	return readRolloutOf(ctx, c, root, now)
}

func readRolloutOf(ctx context.Context, c client.Reader, root *policyv1.Policy, now time.Time) (Rollout, error) {
	if _, replica := root.Labels[propagator.RootPolicyLabel]; replica {
		return Rollout{}, fmt.Errorf("%s/%s is a replica of %s; ask about the root policy", root.Namespace, root.Name, root.Labels[propagator.RootPolicyLabel])
	}
	groups, err := propagator.ClusterGroups(ctx, c, root)
	if err != nil {
		return Rollout{}, fmt.Errorf("placement of %s/%s: %w", root.Namespace, root.Name, err)
	}
	return BuildRollout(root, groups, now), nil
}
