package decisions

import (
	"context"
	"sort"

	"k8s.io/apimachinery/pkg/types"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Groups reads the decision groups of every placement through sdk-go's tracker and merges them,
// in the order given, into one ClusterGroupsMap. A caller that decides the same placements again
// and again keeps a Memo instead.
func Groups(ctx context.Context, reader client.Reader, placements []types.NamespacedName) (sdkv1beta1.ClusterGroupsMap, error) {
	return new(Memo).Groups(ctx, reader, placements)
}

// Merge concatenates decision groups: the groups of the first map keep their order and come first,
// then those of the second, and so on. Indexes are renumbered densely from 0 because the tracker
// walks group indexes 0..n-1; group names are kept, so mandatory groups named by name still match
// in every placement. A cluster chosen by two placements appears in both groups; the rollout
// handler counts it once, in the first group it meets.
func Merge(maps ...sdkv1beta1.ClusterGroupsMap) sdkv1beta1.ClusterGroupsMap {
	out := sdkv1beta1.ClusterGroupsMap{}
	next := int32(0)
	for _, m := range maps {
		keys := make([]sdkv1beta1.GroupKey, 0, len(m))
		for k, clusters := range m {
			if clusters.Len() > 0 {
				keys = append(keys, k)
			}
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i].GroupIndex < keys[j].GroupIndex })
		for _, k := range keys {
			out[sdkv1beta1.GroupKey{GroupName: k.GroupName, GroupIndex: next}] = m[k]
			next++
		}
	}
	return out
}

// Tracker wraps merged groups in a tracker for sdk-go's RolloutHandler. It has no placement of its
// own, so Refresh is a no-op: the groups are a snapshot taken for one decision.
func Tracker(groups sdkv1beta1.ClusterGroupsMap) *sdkv1beta1.PlacementDecisionClustersTracker {
	return sdkv1beta1.NewPlacementDecisionClustersTrackerWithGroups(nil, nil, groups)
}
