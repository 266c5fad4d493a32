package propagator

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/rollout"
)

// turnsTaken are the clusters whose turn came since the root's status last recorded its
// rollout, sorted: the decision's own starts and, when turns were held back from the record
// (root_status_pace.go), the clusters the record still shows waiting that the decision has under
// way. before is the record, of the rollout of generation when its Rollout condition says so.
func turnsTaken(generation int64, before *policyv1.PolicyStatus, d rollout.Decision) []string {
	c := meta.FindStatusCondition(before.Conditions, rolloutCondition)
	if c == nil || c.ObservedGeneration != generation {
		return d.Started
	}
	taken := sets.New(d.Started...)
	for _, l := range before.Status {
		if l != nil && l.RolloutStatus == policyv1.RolloutToApply {
			if now, ok := d.Clusters[l.ClusterName]; ok && now.Status != policyv1.RolloutToApply {
				taken.Insert(l.ClusterName)
			}
		}
	}
	return sets.List(taken)
}

// groupSteps names the decision groups that, since the record before, started enforcing (a first
// cluster of theirs in taken, see turnsTaken) and completed (all their clusters Succeeded, which
// they had not before).
func groupSteps(groups sdkv1beta1.ClusterGroupsMap, before []*policyv1.CompliancePerClusterStatus, taken []string, d rollout.Decision) (started, completed []string) {
	was := map[string]policyv1.RolloutStatus{}
	for _, s := range before {
		if s != nil {
			was[s.ClusterName] = s.RolloutStatus
		}
	}
	starting := map[string]bool{}
	for _, c := range taken {
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

// eachGroup says format of every group, in order, in one note.
func eachGroup(groups []string, format string) string {
	parts := make([]string, len(groups))
	for i, g := range groups {
		parts[i] = fmt.Sprintf(format, g)
	}
	return strings.Join(parts, "; ")
}
