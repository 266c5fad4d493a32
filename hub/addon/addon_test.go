package addon_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	workv1 "open-cluster-management.io/api/work/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub/addon"
)

// eventually is fleettest.Eventually: poll until the condition holds or fail saying why.
var eventually = fleettest.Eventually

func TestAddonManager_RegistersRegentAndDeliversTheAgentToAClusterThatAsks(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	if err := workv1.Install(scheme.Scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(f.Hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- addon.Run(ctx, f.Hub.Config, addon.Options{Image: "example.com/regent:test"}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("addon manager: %v", err)
		}
	})

	eventually(t, time.Minute, func() (bool, string) {
		cma := &addonv1alpha1.ClusterManagementAddOn{}
		err := c.Get(ctx, types.NamespacedName{Name: "regent"}, cma)
		return err == nil && cma.Spec.AddOnMeta.DisplayName == "Regent", fmt.Sprintf("ClusterManagementAddOn regent: %v", err)
	})
	mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: "regent", Namespace: "cluster1"}}
	if err := c.Create(ctx, mca); err != nil {
		t.Fatal(err)
	}

	// The agent's future hub identity may touch only its cluster namespace.
	eventually(t, time.Minute, func() (bool, string) {
		rb := &rbacv1.RoleBinding{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: "regent-addon"}, rb); err != nil {
			return false, fmt.Sprintf("addon role binding: %v", err)
		}
		return len(rb.Subjects) == 1 && rb.Subjects[0].Name == "system:open-cluster-management:cluster:cluster1:addon:regent",
			fmt.Sprintf("subjects %v", rb.Subjects)
	})

	// The registration asks for a client certificate for the agent.
	eventually(t, time.Minute, func() (bool, string) {
		got := &addonv1alpha1.ManagedClusterAddOn{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(mca), got); err != nil {
			return false, err.Error()
		}
		return len(got.Status.Registrations) > 0, fmt.Sprintf("registrations %v", got.Status.Registrations)
	})
	// The agent's manifests reach the cluster namespace as a ManifestWork.
	eventually(t, time.Minute, func() (bool, string) {
		works := &workv1.ManifestWorkList{}
		if err := c.List(ctx, works, client.InNamespace("cluster1")); err != nil {
			return false, err.Error()
		}
		for _, w := range works.Items {
			for _, m := range w.Spec.Workload.Manifests {
				raw := string(m.Raw)
				if strings.Contains(raw, `"kind":"Deployment"`) && strings.Contains(raw, "--cluster-name=cluster1") &&
					strings.Contains(raw, "example.com/regent:test") {
					return true, ""
				}
			}
		}
		return false, fmt.Sprintf("no ManifestWork with the agent Deployment among %d", len(works.Items))
	})

}
