package rollout

import (
	"time"

	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	sdkv1alpha1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// displaced lists the clusters still in flight that the handler's answer leaves out. For
// Progressive the handler fills its window of maxConcurrency clusters in name order, so a cluster
// that joins mid-rollout with a name before an in-flight one takes that one's place in the window
// although it is still applying or soaking; starting every ToApply of the window would then exceed
// maxConcurrency. Each displaced cluster costs the window one of its ToApply starts. In-flight means what the
// handler itself keeps in its window: Progressing or Failed (the deadline, when passed, is the
// handler's to call), or Succeeded within the soak time.
func displaced(in Input, d Decision, result sdkv1alpha1.RolloutResult, now time.Time) []string {
	listed := sets.New[string]()
	for _, r := range result.ClustersToRollout {
		listed.Insert(r.ClusterName)
	}
	for _, r := range result.ClustersTimeOut {
		listed.Insert(r.ClusterName)
	}
	soak := minSuccessTime(in)
	var out []string
	for name, c := range d.Clusters {
		if listed.Has(name) {
			continue
		}
		switch c.Status {
		case policyv1.RolloutProgressing, policyv1.RolloutFailed:
			out = append(out, name)
		case policyv1.RolloutSucceeded:
			if c.LastTransitionTime != nil && now.Before(c.LastTransitionTime.Add(soak)) {
				out = append(out, name)
			}
		}
	}
	return out
}

func minSuccessTime(in Input) time.Duration { return MinSuccessTime(in.Strategy, in.Mode) }

// MinSuccessTime is how long a cluster must have succeeded before its slot frees, counted from
// the success its root's status records: the strategy's soak time, none unless Progressive.
func MinSuccessTime(s clusterv1alpha1.RolloutStrategy, mode Mode) time.Duration {
	switch {
	case mode != Progressive:
		return 0
	case s.Progressive != nil:
		return s.Progressive.MinSuccessTime.Duration
	case s.ProgressivePerGroup != nil:
		return s.ProgressivePerGroup.MinSuccessTime.Duration
	}
	return 0
}

// soakEnds returns how long until the first soak time still running ends. The handler's own
// recheck time covers only the clusters in its answer; a displaced cluster still soaking holds a
// slot too, and when its soak ends a cluster may start although nothing else changes.
func soakEnds(in Input, d Decision, now time.Time) (time.Duration, bool) {
	soak := minSuccessTime(in)
	if soak <= 0 {
		return 0, false
	}
	var first time.Duration
	found := false
	for _, c := range d.Clusters {
		if c.Status != policyv1.RolloutSucceeded || c.LastTransitionTime == nil {
			continue
		}
		if left := c.LastTransitionTime.Add(soak).Sub(now); left > 0 && (!found || left < first) {
			first, found = left, true
		}
	}
	return first, found
}
