package spokeaddon_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub/addon"
)

// A hub may run the addon manager beside agents holding issued tokens (the quickstart does): the
// manager's grant to OCM-issued identities must not take the tokens' access away.
func TestIssueHubIdentity_KeepsItsAccessOnceTheAddonManagerGrantsTheRole(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	identity := addonHubIdentity(t, f.Hub, "cluster1")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- addon.Run(ctx, f.Hub.Config, addon.Options{}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("addon manager: %v", err)
		}
	})
	hub := newClient(t, f.Hub.Config)
	mca := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster1", Name: "regent"}}
	if err := hub.Create(ctx, mca); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() (bool, string) {
		rb := &rbacv1.RoleBinding{}
		err := hub.Get(ctx, client.ObjectKey{Namespace: "cluster1", Name: "regent-addon"}, rb)
		return err == nil && len(rb.Subjects) == 1 && rb.Subjects[0].Kind == rbacv1.GroupKind,
			fmt.Sprintf("addon manager granted the role to OCM's group: %v %v", err, rb.Subjects)
	})
	if err := newClient(t, identity).List(ctx, &policyv1.PolicyList{}, client.InNamespace("cluster1")); err != nil {
		t.Errorf("issued token after the addon manager's grant: %v", err)
	}
}
