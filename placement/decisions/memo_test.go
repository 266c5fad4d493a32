package decisions_test

import (
	"context"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/placement/decisions"
)

// A Memo hands back the groups it built while the placement's decisions stay as they were, and
// builds them again from the apiserver's objects as soon as one changes or another appears.
func TestMemo_RebuildsAPlacementsGroupsOnlyWhenItsDecisionsChange(t *testing.T) {
	hub := fleettest.Hub(t)
	scheme := runtime.NewScheme()
	if err := clusterv1beta1.Install(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(hub.Config, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	decision := func(name, index string, clusters ...string) *clusterv1beta1.PlacementDecision {
		d := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default",
			Labels: map[string]string{clusterv1beta1.PlacementLabel: "pl", clusterv1beta1.DecisionGroupIndexLabel: index}}}
		if err := c.Create(ctx, d); err != nil {
			t.Fatal(err)
		}
		setClusters(t, c, d, clusters...)
		return d
	}
	first := decision("pl-decision-0", "0", "c1", "c2")
	placements := []types.NamespacedName{{Namespace: "default", Name: "pl"}}
	var m decisions.Memo
	groups := func() sdkv1beta1.ClusterGroupsMap {
		t.Helper()
		g, err := m.Groups(ctx, c, placements)
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	group0 := sdkv1beta1.GroupKey{GroupIndex: 0}

	built := groups()
	if !built.GetClusters().Equal(sets.New("c1", "c2")) {
		t.Fatalf("groups %v, want c1 and c2", built)
	}
	if again := groups(); reflect.ValueOf(again[group0]).Pointer() != reflect.ValueOf(built[group0]).Pointer() {
		t.Error("the same decisions built the groups again")
	}

	setClusters(t, c, first, "c1", "c3")
	if got := groups(); !got.GetClusters().Equal(sets.New("c1", "c3")) {
		t.Fatalf("after the decision changed: %v, want c1 and c3", got)
	}
	decision("pl-decision-1", "1", "c4")
	got := groups()
	if !got[group0].Equal(sets.New("c1", "c3")) || !got[sdkv1beta1.GroupKey{GroupIndex: 1}].Equal(sets.New("c4")) {
		t.Fatalf("after a second decision: %v, want group 0 {c1, c3} and group 1 {c4}", got)
	}
	// What the plain function reads is the same.
	plain, err := decisions.Groups(ctx, c, placements)
	if err != nil || !reflect.DeepEqual(plain, got) {
		t.Fatalf("Groups = %v, %v; the Memo's %v", plain, err, got)
	}
}

func setClusters(t *testing.T, c client.Client, d *clusterv1beta1.PlacementDecision, clusters ...string) {
	t.Helper()
	d.Status.Decisions = nil
	for _, name := range clusters {
		d.Status.Decisions = append(d.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: name})
	}
	if err := c.Status().Update(context.Background(), d); err != nil {
		t.Fatal(err)
	}
}
