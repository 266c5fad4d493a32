package spokeaddon_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"open-cluster-management.io/addon-framework/pkg/lease"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	spokeaddon "regent.dev/regent/spoke-addon"
)

// The addon's hub identity renews its own Lease, the one addon-framework's lease updater keeps on
// the hub when the managed cluster cannot hold it, and no other.
func TestHubRole_RenewsTheAddonsOwnLeaseAndNoOther(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	admin := newClient(t, f.Hub.Config)
	for _, ns := range []string{"cluster1", "cluster2"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	identity := addonHubIdentity(t, f.Hub, "cluster1")

	// addon-framework's updater: the "managed cluster" here has no install namespace, so the
	// updater falls back to the Lease in the cluster namespace on the hub, with the addon's identity.
	local, err := kubernetes.NewForConfig(f.Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	go lease.NewLeaseUpdater(local, spokeaddon.AddonName, "no-such-install-namespace").WithHubLeaseConfig(identity, "cluster1").Start(ctx)
	eventually(t, time.Minute, func() (bool, string) {
		l := &coordinationv1.Lease{}
		err := admin.Get(ctx, client.ObjectKey{Namespace: "cluster1", Name: spokeaddon.AddonName}, l)
		return err == nil && l.Spec.RenewTime != nil, fmt.Sprintf("addon lease on the hub: %v", err)
	})

	hub, err := kubernetes.NewForConfig(identity)
	if err != nil {
		t.Fatal(err)
	}
	leases := hub.CoordinationV1().Leases("cluster1")
	own, err := leases.Get(ctx, spokeaddon.AddonName, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("get its own lease: %v", err)
	}
	own.Spec.RenewTime = &metav1.MicroTime{Time: time.Now()}
	if _, err := leases.Update(ctx, own, metav1.UpdateOptions{}); err != nil {
		t.Errorf("renew its own lease: %v", err)
	}

	// Another Lease in the same namespace, say another addon's.
	other := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster1", Name: "another-addon"}}
	if err := admin.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	forbidden := func(what string, err error) {
		t.Helper()
		if !apierrors.IsForbidden(err) {
			t.Errorf("%s: %v, want Forbidden", what, err)
		}
	}
	_, err = leases.Get(ctx, other.Name, metav1.GetOptions{})
	forbidden("get another lease", err)
	_, err = leases.Update(ctx, other, metav1.UpdateOptions{})
	forbidden("renew another lease", err)
	_, err = leases.List(ctx, metav1.ListOptions{})
	forbidden("list leases", err)
	_, err = hub.CoordinationV1().Leases("cluster2").Create(ctx,
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: spokeaddon.AddonName}}, metav1.CreateOptions{})
	forbidden("create a lease in another cluster's namespace", err)
	err = newClient(t, identity).List(ctx, &policyv1.PolicyList{}, client.InNamespace("cluster2"))
	forbidden("list another cluster's policies", err)
}
