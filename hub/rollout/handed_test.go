package rollout

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"sort"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	sdkv1alpha1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1alpha1"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"

	"regent.dev/regent/placement/decisions"
)

// Leaving out the finished groups, the untouched groups sdk-go would not reach and the ToApply
// statuses changes nothing sdk-go answers per group: for random fleets in every state (finished
// groups, groups under way, untouched ones, mandatory groups, soak, deadline, failure budget, no
// failure at all), the handler answers the same about the whole fleet and about what is handed.
func TestHanded_PerGroupAnswersAsWithEveryStatus(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	NewPlanner(clocktesting.NewFakeClock(now)) // installs the handler's clock
	states := []sdkv1alpha1.RolloutStatus{sdkv1alpha1.ToApply, sdkv1alpha1.Progressing, sdkv1alpha1.Succeeded,
		sdkv1alpha1.Failed, sdkv1alpha1.TimeOut}
	rng := rand.New(rand.NewPCG(1, 2))
	left, unreached := 0, 0
	for run := range 1000 {
		groups := sdkv1beta1.ClusterGroupsMap{}
		var statuses []sdkv1alpha1.ClusterRolloutStatus
		// Half the fleets have no failure: the untouched groups past the first are then not read.
		healthy := states[:3]
		if rng.IntN(2) == 0 {
			healthy = states
		}
		untouched := map[sdkv1beta1.GroupKey]bool{}
		for g := range 1 + rng.IntN(6) {
			key := sdkv1beta1.GroupKey{GroupName: fmt.Sprintf("g%d", g), GroupIndex: int32(g)}
			groups[key] = sets.New[string]()
			// A group is finished, under way or untouched, as a rollout leaves them.
			phase := rng.IntN(3)
			untouched[key] = phase == 2
			for c := range 1 + rng.IntN(6) {
				name := fmt.Sprintf("c%d-%d", g, c)
				groups[key].Insert(name)
				status := healthy[rng.IntN(len(healthy))]
				switch {
				case phase == 0:
					status = sdkv1alpha1.Succeeded
				case phase == 2 || rng.IntN(4) == 0:
					if rng.IntN(2) == 0 {
						continue // no status at all
					}
					status = sdkv1alpha1.ToApply
				}
				ltt := metav1.NewTime(now.Add(-time.Duration(rng.IntN(600)) * time.Second))
				statuses = append(statuses, sdkv1alpha1.ClusterRolloutStatus{ClusterName: name, GroupKey: key,
					Status: status, LastTransitionTime: &ltt})
			}
		}
		if rng.IntN(3) == 0 { // a cluster the placement dropped
			ltt := metav1.NewTime(now)
			statuses = append(statuses, sdkv1alpha1.ClusterRolloutStatus{ClusterName: "gone", Status: states[rng.IntN(len(states))], LastTransitionTime: &ltt})
		}
		strategy := clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup,
			ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{
				RolloutConfig: clusterv1alpha1.RolloutConfig{MaxFailures: intstr.FromInt32(int32(rng.IntN(3))),
					MinSuccessTime: metav1.Duration{Duration: time.Duration(rng.IntN(300)) * time.Second}, ProgressDeadline: "5m"}}}
		if rng.IntN(2) == 0 {
			strategy.ProgressivePerGroup.MandatoryDecisionGroups.MandatoryDecisionGroups = []clusterv1alpha1.MandatoryDecisionGroup{{GroupName: "g0"}}
		}
		whole, err := sdkv1alpha1.NewRolloutHandler[struct{}](decisions.Tracker(groups), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, all, err := whole.GetRolloutCluster(strategy, append([]sdkv1alpha1.ClusterRolloutStatus(nil), statuses...))
		if err != nil {
			t.Fatal(err)
		}
		under, given := handed(strategy, groups, statuses, now)
		if len(given) > len(statuses) || under.GetClusters().Len() > groups.GetClusters().Len() {
			t.Fatalf("run %d: handed more than it was given", run)
		}
		part, err := sdkv1alpha1.NewRolloutHandler[struct{}](decisions.Tracker(under), nil)
		if err != nil {
			t.Fatal(err)
		}
		_, some, err := part.GetRolloutCluster(strategy, given)
		if err != nil {
			t.Fatal(err)
		}
		left += groups.GetClusters().Len() - under.GetClusters().Len()
		for key, clusters := range under {
			if untouched[key] && clusters.Len() == 0 {
				unreached++
			}
		}
		all.ClustersRemoved, some.ClustersRemoved = nil, nil // not read by Plan
		norm(&all)
		norm(&some)
		if !reflect.DeepEqual(all, some) {
			t.Fatalf("run %d: with every status %+v\nwith those handed %+v\nstatuses %+v\ngiven %+v\ngroups %v under %v", run, all, some, statuses, given, groups, under)
		}
	}
	if left == 0 || unreached == 0 {
		t.Fatalf("groups emptied: %d clusters, %d untouched groups: the runs test nothing", left, unreached)
	}
}

func norm(r *sdkv1alpha1.RolloutResult) {
	for _, l := range [][]sdkv1alpha1.ClusterRolloutStatus{r.ClustersToRollout, r.ClustersTimeOut} {
		sort.Slice(l, func(i, j int) bool { return l[i].ClusterName < l[j].ClusterName })
		for i := range l {
			// A ToApply the handler made up has no time; one it was given keeps its own. Plan
			// reads neither: it keeps its own record of each cluster's time.
			if l[i].Status == sdkv1alpha1.ToApply {
				l[i].LastTransitionTime = nil
			}
		}
	}
}
