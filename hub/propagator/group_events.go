package propagator

import (
	"fmt"
	"sort"

	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/rollout"
)

// groupSteps names the decision groups that, in this decision, started enforcing (a first cluster
// of theirs started) and completed (all their clusters Succeeded, which they had not before).
func groupSteps(groups sdkv1beta1.ClusterGroupsMap, before []*policyv1.CompliancePerClusterStatus, d rollout.Decision) (started, completed []string) {
	was := map[string]policyv1.RolloutStatus{}
	for _, s := range before {
		if s != nil {
			was[s.ClusterName] = s.RolloutStatus
		}
	}
	starting := map[string]bool{}
	for _, c := range d.Started {
		starting[c] = true
	}
	keys := make([]sdkv1beta1.GroupKey, 0, len(groups))
	for k := range groups {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].GroupIndex < keys[j].GroupIndex })
	for _, k := range keys {
		clusters := groups[k]
		if clusters.Len() == 0 {
			continue
		}
		anyStarting, allDone, allDoneBefore := false, true, true
		for c := range clusters {
			anyStarting = anyStarting || starting[c]
			allDone = allDone && d.Clusters[c].Status == policyv1.RolloutSucceeded
			allDoneBefore = allDoneBefore && was[c] == policyv1.RolloutSucceeded
		}
		if anyStarting {
			started = append(started, groupName(k))
		}
		if allDone && !allDoneBefore {
			completed = append(completed, groupName(k))
		}
	}
	return started, completed
}

func groupName(k sdkv1beta1.GroupKey) string {
	if k.GroupName != "" {
		return fmt.Sprintf("%q (index %d)", k.GroupName, k.GroupIndex)
	}
	return fmt.Sprintf("index %d", k.GroupIndex)
}
