package fleet_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	clocktesting "k8s.io/utils/clock/testing"
	"open-cluster-management.io/addon-framework/pkg/lease"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

const agentNamespace = "open-cluster-management-agent-addon"

// TestAddonHealth_TurnsAddonLeasesIntoAvailableAsOCMsRegistrationAgentDoes runs the stand-in with
// a fake clock against a real hub and managed clusters, with addon-framework's own lease updater
// playing the agent.
func TestAddonHealth_TurnsAddonLeasesIntoAvailableAsOCMsRegistrationAgentDoes(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}, {Name: "cluster2"}}})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	clock := clocktesting.NewFakeClock(time.Now())
	if err := f.StartAddonHealth(ctx, fleet.AddonHealthOptions{Clock: clock}); err != nil {
		t.Fatal(err)
	}
	hub, local := newClient(t, f.Hub), newClient(t, f.Managed[0])
	kube, err := kubernetes.NewForConfig(f.Managed[0].Config)
	if err != nil {
		t.Fatal(err)
	}
	a := &addons{t: t, hub: hub}
	for _, ns := range []string{agentNamespace, "elsewhere", "late-ns"} {
		if err := local.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	a.create("cluster1", "regent", nil)
	a.create("cluster2", "regent", nil)

	t.Run("NoLeaseIsUnknown", func(t *testing.T) {
		a.available("cluster1", "regent", metav1.ConditionUnknown, "ManagedClusterAddOnLeaseNotFound", "The status of regent add-on is unknown.")
		a.available("cluster2", "regent", metav1.ConditionUnknown, "ManagedClusterAddOnLeaseNotFound", "The status of regent add-on is unknown.")
	})

	t.Run("ALeaseInAnotherNamespaceChangesNothingAndWritesNothing", func(t *testing.T) {
		before := a.get("cluster1", "regent").ResourceVersion
		putLease(t, local, "elsewhere", "regent", clock.Now())
		time.Sleep(2 * time.Second)
		a.available("cluster1", "regent", metav1.ConditionUnknown, "ManagedClusterAddOnLeaseNotFound", "The status of regent add-on is unknown.")
		if after := a.get("cluster1", "regent").ResourceVersion; after != before {
			t.Errorf("addon rewritten with nothing changed: resourceVersion %s → %s", before, after)
		}
	})

	agent := startAgent(t, kube)
	t.Run("AgentRenewingItsLeaseIsAvailable", func(t *testing.T) {
		a.available("cluster1", "regent", metav1.ConditionTrue, "ManagedClusterAddOnLeaseUpdated", "regent add-on is available.")
	})

	t.Run("OnlyTheClusterWhoseAgentRunsIsAvailable", func(t *testing.T) {
		time.Sleep(time.Second)
		a.available("cluster2", "regent", metav1.ConditionUnknown, "ManagedClusterAddOnLeaseNotFound", "The status of regent add-on is unknown.")
	})

	t.Run("NothingWrittenWhileNothingChanges", func(t *testing.T) {
		before := a.get("cluster1", "regent").ResourceVersion
		// Lease events whose renewal says the same: each wakes the checker, none is a change.
		l := &coordinationv1.Lease{}
		if err := local.Get(ctx, client.ObjectKey{Namespace: agentNamespace, Name: "regent"}, l); err != nil {
			t.Fatal(err)
		}
		l.Spec.HolderIdentity = ptr("someone")
		if err := local.Update(ctx, l); err != nil {
			t.Fatal(err)
		}
		putLease(t, local, agentNamespace, "unrelated", clock.Now())
		time.Sleep(2 * time.Second)
		if after := a.get("cluster1", "regent").ResourceVersion; after != before {
			t.Errorf("addon rewritten with nothing changed: resourceVersion %s → %s", before, after)
		}
	})

	t.Run("AgentStoppedIsNotAvailableOnceTheGraceRunsOut", func(t *testing.T) {
		agent.stop()
		renewed := renewTime(t, local, agentNamespace, "regent")
		clock.SetTime(renewed.Add(fleet.AddonLeaseGrace - time.Second))
		time.Sleep(time.Second)
		a.available("cluster1", "regent", metav1.ConditionTrue, "ManagedClusterAddOnLeaseUpdated", "regent add-on is available.")
		// No event comes when a Lease runs out: the checker wakes by itself.
		clock.SetTime(renewed.Add(fleet.AddonLeaseGrace))
		a.available("cluster1", "regent", metav1.ConditionFalse, "ManagedClusterAddOnLeaseUpdateStopped", "regent add-on is not available.")
		// The renewal that restarts the agent must fall after the one that ran out.
		time.Sleep(time.Until(renewed.Add(time.Second)))
	})

	t.Run("AgentStartedAgainIsAvailable", func(t *testing.T) {
		agent = startAgent(t, kube)
		a.available("cluster1", "regent", metav1.ConditionTrue, "ManagedClusterAddOnLeaseUpdated", "regent add-on is available.")
		agent.stop()
	})

	t.Run("AddonCreatedAfterItsLeaseInItsOwnInstallNamespace", func(t *testing.T) {
		putLease(t, local, "late-ns", "late", clock.Now())
		a.create("cluster1", "late", func(m *addonv1alpha1.ManagedClusterAddOn) { m.Spec.InstallNamespace = "late-ns" })
		a.available("cluster1", "late", metav1.ConditionTrue, "ManagedClusterAddOnLeaseUpdated", "late add-on is available.")
	})

	t.Run("LeaseDeletedIsUnknown", func(t *testing.T) {
		if err := local.Delete(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "late-ns", Name: "late"}}); err != nil {
			t.Fatal(err)
		}
		a.available("cluster1", "late", metav1.ConditionUnknown, "ManagedClusterAddOnLeaseNotFound", "The status of late add-on is unknown.")
	})

	t.Run("WritesBesideRegistrationsTheAddonManagerWroteAsV1beta1", func(t *testing.T) {
		a.create("cluster1", "registered", nil)
		a.available("cluster1", "registered", metav1.ConditionUnknown, "ManagedClusterAddOnLeaseNotFound", "The status of registered add-on is unknown.")
		// As addon-framework writes them. Without OCM's conversion webhook they are stored as an
		// empty entry, which the v1alpha1 Go type would write back as an invalid one.
		registration := map[string]any{"type": "kubeClient", "kubeClient": map[string]any{
			"subject": map[string]any{"user": "system:open-cluster-management:cluster:cluster1:addon:registered:agent:a"}}}
		fleettest.Eventually(t, 30*time.Second, func() (bool, string) {
			u := v1beta1Addon(t, hub, "cluster1", "registered")
			if err := unstructured.SetNestedSlice(u.Object, []any{registration}, "status", "registrations"); err != nil {
				return false, err.Error()
			}
			err := hub.Status().Update(ctx, u)
			return err == nil, fmt.Sprintf("write v1beta1 registrations: %v", err)
		})
		putLease(t, local, agentNamespace, "registered", clock.Now())
		a.available("cluster1", "registered", metav1.ConditionTrue, "ManagedClusterAddOnLeaseUpdated", "registered add-on is available.")
		if kept := a.get("cluster1", "registered").Status.Registrations; len(kept) != 1 {
			t.Errorf("registrations after the stand-in wrote Available: %+v, want the one entry", kept)
		}
	})

	t.Run("CustomizedModeIsLeftToTheAddonsManager", func(t *testing.T) {
		a.create("cluster1", "custom", nil)
		a.available("cluster1", "custom", metav1.ConditionUnknown, "ManagedClusterAddOnLeaseNotFound", "The status of custom add-on is unknown.")
		// Its manager takes over health and says what it sees.
		a.editStatus("cluster1", "custom", func(m *addonv1alpha1.ManagedClusterAddOn) {
			m.Status.HealthCheck.Mode = addonv1alpha1.HealthCheckModeCustomized
			meta.SetStatusCondition(&m.Status.Conditions, metav1.Condition{Type: "Available", Status: metav1.ConditionFalse,
				Reason: "ProbeFailed", Message: "the manager's own probe failed"})
		})
		before := a.get("cluster1", "custom").ResourceVersion
		putLease(t, local, agentNamespace, "custom", clock.Now())
		time.Sleep(2 * time.Second)
		a.available("cluster1", "custom", metav1.ConditionFalse, "ProbeFailed", "the manager's own probe failed")
		if after := a.get("cluster1", "custom").ResourceVersion; after != before {
			t.Errorf("Customized addon written by the stand-in: resourceVersion %s → %s", before, after)
		}
	})
}

func ptr[T any](v T) *T { return &v }

func v1beta1Addon(t *testing.T, hub client.Client, cluster, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: addonv1alpha1.GroupName, Version: "v1beta1", Kind: "ManagedClusterAddOn"})
	if err := hub.Get(context.Background(), client.ObjectKey{Namespace: cluster, Name: name}, u); err != nil {
		t.Fatal(err)
	}
	return u
}

type addons struct {
	t   *testing.T
	hub client.Client
}

func (a *addons) create(cluster, name string, mutate func(*addonv1alpha1.ManagedClusterAddOn)) {
	a.t.Helper()
	m := &addonv1alpha1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Namespace: cluster, Name: name}}
	if mutate != nil {
		mutate(m)
	}
	if err := a.hub.Create(context.Background(), m); err != nil {
		a.t.Fatal(err)
	}
}

func (a *addons) get(cluster, name string) *addonv1alpha1.ManagedClusterAddOn {
	a.t.Helper()
	m := &addonv1alpha1.ManagedClusterAddOn{}
	if err := a.hub.Get(context.Background(), client.ObjectKey{Namespace: cluster, Name: name}, m); err != nil {
		a.t.Fatal(err)
	}
	return m
}

// available waits until the addon's Available condition says status, reason and message.
func (a *addons) available(cluster, name string, status metav1.ConditionStatus, reason, message string) {
	a.t.Helper()
	fleettest.Eventually(a.t, 30*time.Second, func() (bool, string) {
		c := meta.FindStatusCondition(a.get(cluster, name).Status.Conditions, "Available")
		if c == nil {
			return false, fmt.Sprintf("%s/%s has no Available condition, want %s", cluster, name, status)
		}
		return c.Status == status && c.Reason == reason && c.Message == message,
			fmt.Sprintf("%s/%s Available %s %s %q, want %s %s %q", cluster, name, c.Status, c.Reason, c.Message, status, reason, message)
	})
}

func (a *addons) editStatus(cluster, name string, mutate func(*addonv1alpha1.ManagedClusterAddOn)) {
	a.t.Helper()
	fleettest.Eventually(a.t, 30*time.Second, func() (bool, string) {
		m := a.get(cluster, name)
		mutate(m)
		err := a.hub.Status().Update(context.Background(), m)
		return err == nil, fmt.Sprintf("status of %s/%s: %v", cluster, name, err)
	})
}

// putLease creates or renews a Lease as an agent would, renewed at the given moment.
func putLease(t *testing.T, c client.Client, namespace, name string, renewed time.Time) {
	t.Helper()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	err := c.Get(context.Background(), client.ObjectKeyFromObject(l), l)
	l.Spec.RenewTime = &metav1.MicroTime{Time: renewed}
	switch {
	case apierrors.IsNotFound(err):
		err = c.Create(context.Background(), l)
	case err == nil:
		err = c.Update(context.Background(), l)
	}
	if err != nil {
		t.Fatal(err)
	}
}

func renewTime(t *testing.T, c client.Client, namespace, name string) time.Time {
	t.Helper()
	l := &coordinationv1.Lease{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, l); err != nil {
		t.Fatal(err)
	}
	if l.Spec.RenewTime == nil {
		t.Fatalf("Lease %s/%s was never renewed", namespace, name)
	}
	return l.Spec.RenewTime.Time
}

// runningAgent is addon-framework's lease updater, as the spoke addon runs it.
type runningAgent struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
}

func startAgent(t *testing.T, kube kubernetes.Interface) *runningAgent {
	ctx, cancel := context.WithCancel(context.Background())
	r := &runningAgent{cancel: cancel}
	r.done.Add(1)
	go func() {
		defer r.done.Done()
		lease.NewLeaseUpdater(kube, "regent", agentNamespace).Start(ctx)
	}()
	t.Cleanup(r.stop)
	return r
}

func (r *runningAgent) stop() {
	r.cancel()
	r.done.Wait()
}
