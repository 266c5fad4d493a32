package decisions

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/util/sets"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"
)

func TestMerge_SecondPlacementsGroupsFollowTheFirstWithDenseIndexes(t *testing.T) {
	a := sdkv1beta1.ClusterGroupsMap{
		{GroupName: "canary", GroupIndex: 0}: sets.New("a1"),
		{GroupName: "rest", GroupIndex: 1}:   sets.New("a2", "a3"),
	}
	b := sdkv1beta1.ClusterGroupsMap{
		{GroupIndex: 0}: sets.New("b1"),
		{GroupIndex: 3}: sets.New("b2"),
		{GroupIndex: 2}: sets.New[string](),
	}
	got := Merge(a, b)
	want := sdkv1beta1.ClusterGroupsMap{
		{GroupName: "canary", GroupIndex: 0}: sets.New("a1"),
		{GroupName: "rest", GroupIndex: 1}:   sets.New("a2", "a3"),
		{GroupIndex: 2}:                      sets.New("b1"),
		{GroupIndex: 3}:                      sets.New("b2"),
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Merge = %v, want %v", got, want)
	}
}

func TestTracker_ServesMergedGroupsToTheRolloutHandler(t *testing.T) {
	groups := Merge(sdkv1beta1.ClusterGroupsMap{{GroupName: "canary", GroupIndex: 0}: sets.New("c1")},
		sdkv1beta1.ClusterGroupsMap{{GroupName: "canary", GroupIndex: 0}: sets.New("c2")})
	tr := Tracker(groups)
	got := tr.ExistingClusterGroups(sdkv1beta1.GroupKey{GroupName: "canary"}).GetClusters()
	if !got.Equal(sets.New("c1", "c2")) {
		t.Fatalf("mandatory group by name = %v, want both placements' canaries", sets.List(got))
	}
	if err := tr.Refresh(); err != nil {
		t.Fatalf("Refresh on a snapshot tracker: %v", err)
	}
	if tr.ExistingClusterGroupsBesides().GetClusters().Len() != 2 {
		t.Fatalf("Refresh must not drop the snapshot")
	}
}
