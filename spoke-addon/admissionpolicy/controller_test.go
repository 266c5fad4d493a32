package admissionpolicy

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
)

// TestLifecycle shares one apiserver and one controller between specifications; each uses its
// own policy and policy server, and the test plays the policy server through the contract:
// replica Leases and revision status.
func TestLifecycle(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()

	t.Run("Create_ScheduledThenActiveWhenEveryReplicaReady", func(t *testing.T) {
		liveLeases(t, c, "create", 0, 1, 2)
		// Monitor first: Kubewarden allows monitor -> protect, not the reverse.
		monitored := clusterPolicy("create", "create")
		monitored.Spec.Mode = kubewardenv1.ModeMonitor
		if err := c.Create(ctx, monitored); err != nil {
			t.Fatal(err)
		}
		p := waitForPolicy(t, c, "create", "Scheduled", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			s := findCondition(p.Status.Conditions, kubewardenv1.ConditionScheduled)
			return s != nil && s.Status == metav1.ConditionTrue
		})
		if p.Status.Phase != kubewardenv1.PhasePending || readyReplicas(p.Status, metav1.ConditionUnknown) != "0,1,2" {
			t.Errorf("before any replica reports: phase %s, Unknown replicas %q; want Pending and 0,1,2",
				p.Status.Phase, readyReplicas(p.Status, metav1.ConditionUnknown))
		}
		if !slices.Contains(p.Finalizers, finalizer) {
			t.Errorf("finalizers = %v, want %s", p.Finalizers, finalizer)
		}
		rev := &kubewardenv1.PolicyRevision{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "clusterwide-create-g1"}, rev); err != nil {
			t.Fatal(err)
		}
		if s := revisionCondition(rev, kubewardenv1.ConditionScheduled); s == nil || s.Status != metav1.ConditionTrue {
			t.Errorf("revision conditions = %+v, want Scheduled=True", rev.Status.Conditions)
		}
		if !rev.Spec.Enabled || rev.Labels[kubewardenv1.PolicyServerLabel] != "create" || rev.Labels[PolicyLabel] != "clusterwide-create" ||
			rev.Spec.ObjectReference.UID != string(p.UID) {
			t.Errorf("revision = %+v %+v", rev.Labels, rev.Spec.ObjectReference)
		}
		var data kubewardenv1.PolicySpec
		if err := json.Unmarshal(rev.Spec.Data.Raw, &data); err != nil || data.Module != "file:///policies/v1.wasm" {
			t.Errorf("revision data = %s (%v), want the policy's spec", rev.Spec.Data.Raw, err)
		}
		if u := webhookURL(t, c, "clusterwide-create"); u != "" {
			t.Errorf("webhook before any replica is Ready: %s", u)
		}

		report(t, c, "clusterwide-create-g1", append(readyOn(metav1.ConditionTrue, 0, 1, 2), initializedTrue())...)
		p = waitForPolicy(t, c, "create", "Active", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			return p.Status.Phase == kubewardenv1.PhaseActive
		})
		if p.Status.ServingGeneration != 1 || p.Status.Mode != kubewardenv1.ModeMonitor || readyReplicas(p.Status, metav1.ConditionTrue) != "0,1,2" {
			t.Errorf("status = %+v; want serving 1, monitor, Ready on 0,1,2", p.Status)
		}
		if u := webhookURL(t, c, "clusterwide-create"); u != "https://127.0.0.1:9443/create/validate/clusterwide-create/1" {
			t.Errorf("webhook URL = %q", u)
		}
	})

	t.Run("Update_WebhookSwitchesOnlyAfterEveryLiveReplicaReady", func(t *testing.T) {
		p := waitForPolicy(t, c, "create", "Active", func(p *kubewardenv1.ClusterAdmissionPolicy) bool { return p.Status.ServingGeneration == 1 })
		update(t, c, p, func() { p.Spec.Mode = kubewardenv1.ModeProtect })
		report(t, c, "clusterwide-create-g2", append(readyOn(metav1.ConditionTrue, 0, 1), initializedTrue())...)
		p = waitForPolicy(t, c, "create", "shows replicas 0 and 1 Ready for generation 2", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			return p.Generation == 2 && readyReplicas(p.Status, metav1.ConditionTrue) == "0,1"
		})
		if p.Status.Phase != kubewardenv1.PhasePending || p.Status.ServingGeneration != 1 || p.Status.Mode != kubewardenv1.ModeMonitor {
			t.Errorf("with replica 2 not Ready: phase %s serving %d mode %s; want Pending, 1, monitor", p.Status.Phase, p.Status.ServingGeneration, p.Status.Mode)
		}
		if u := webhookURL(t, c, "clusterwide-create"); !strings.HasSuffix(u, "/clusterwide-create/1") {
			t.Errorf("webhook moved before every replica was Ready: %s", u)
		}
		report(t, c, "clusterwide-create-g2", readyOn(metav1.ConditionTrue, 2)...)
		p = waitForPolicy(t, c, "create", "serves generation 2", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			return p.Status.ServingGeneration == 2 && p.Status.Phase == kubewardenv1.PhaseActive
		})
		if p.Status.Mode != kubewardenv1.ModeProtect {
			t.Errorf("mode = %s, want protect", p.Status.Mode)
		}
		if u := webhookURL(t, c, "clusterwide-create"); !strings.HasSuffix(u, "/clusterwide-create/2") {
			t.Errorf("webhook = %s, want generation 2", u)
		}
	})

	t.Run("ExpiredReplicaLease_DoesNotBlockAndItsConditionsArePruned", func(t *testing.T) {
		liveLeases(t, c, "expiry", 0, 1)
		replicaLease(t, c, "expiry", 2, time.Now().Add(-time.Hour), 10)
		// Replica 3 is live now and goes quiet: its Lease expires without any event.
		replicaLease(t, c, "expiry", 3, time.Now(), 2)
		if err := c.Create(ctx, clusterPolicy("expiry", "expiry")); err != nil {
			t.Fatal(err)
		}
		report(t, c, "clusterwide-expiry-g1", append(readyOn(metav1.ConditionTrue, 0, 1), append(readyOn(metav1.ConditionFalse, 2), initializedTrue())...)...)
		p := waitForPolicy(t, c, "expiry", "Active once replica 3's Lease expired", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			return p.Status.Phase == kubewardenv1.PhaseActive
		})
		if got := readyReplicas(p.Status, metav1.ConditionTrue); got != "0,1" || len(p.Status.Replicas) != 2 {
			t.Errorf("Ready replicas %q, reports %+v; want only live replicas 0,1", got, p.Status.Replicas)
		}
		if u := webhookURL(t, c, "clusterwide-expiry"); !strings.HasSuffix(u, "/clusterwide-expiry/1") {
			t.Errorf("webhook = %q", u)
		}
	})

	t.Run("BadRevision_FailedAndPreviousGenerationKeepsServing", func(t *testing.T) {
		liveLeases(t, c, "bad", 0)
		p := clusterPolicy("bad", "bad")
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		report(t, c, "clusterwide-bad-g1", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
		waitForPolicy(t, c, "bad", "Active", func(p *kubewardenv1.ClusterAdmissionPolicy) bool { return p.Status.ServingGeneration == 1 })
		update(t, c, p, func() { p.Spec.Module = "registry://nowhere.invalid/policy:v2" })
		report(t, c, "clusterwide-bad-g2", kubewardenv1.PolicyCondition{Type: kubewardenv1.ConditionInitialized,
			Status: metav1.ConditionFalse, Reason: "PullError", Message: "dial tcp: lookup nowhere.invalid: no such host"})
		p = waitForPolicy(t, c, "bad", "Failed", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			return p.Status.Phase == kubewardenv1.PhaseFailed
		})
		init := findCondition(p.Status.Conditions, kubewardenv1.ConditionInitialized)
		if init == nil || init.Reason != "PullError" || !strings.Contains(init.Message, "no such host") || init.ObservedGeneration != 2 {
			t.Errorf("Initialized = %+v, want PullError about generation 2 saying why", init)
		}
		if p.Status.ServingGeneration != 1 || !strings.HasSuffix(webhookURL(t, c, "clusterwide-bad"), "/clusterwide-bad/1") {
			t.Errorf("serving %d, webhook %s; want generation 1 to keep serving", p.Status.ServingGeneration, webhookURL(t, c, "clusterwide-bad"))
		}
	})

	t.Run("Rollback_RestoresAKeptGenerationAsANewOne", func(t *testing.T) {
		p := waitForPolicy(t, c, "bad", "Failed on generation 2", func(p *kubewardenv1.ClusterAdmissionPolicy) bool { return p.Generation == 2 })
		update(t, c, p, func() { p.Annotations = map[string]string{kubewardenv1.RollbackAnnotation: "9"} })
		p = waitForPolicy(t, c, "bad", "says generation 9 is not kept", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			r := findCondition(p.Status.Conditions, conditionRollback)
			return r != nil && r.Status == metav1.ConditionFalse
		})
		if r := findCondition(p.Status.Conditions, conditionRollback); r.Message != "generation 9 is not kept; kept generations: 1, 2" {
			t.Errorf("rollback condition = %+v", r)
		}
		update(t, c, p, func() { p.Annotations[kubewardenv1.RollbackAnnotation] = "1" })
		p = waitForPolicy(t, c, "bad", "restored generation 1's spec as generation 3", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			return p.Generation == 3 && findCondition(p.Status.Conditions, kubewardenv1.ConditionScheduled).ObservedGeneration == 3
		})
		if _, ok := p.Annotations[kubewardenv1.RollbackAnnotation]; ok || p.Spec.Module != "file:///policies/v1.wasm" {
			t.Errorf("after rollback: annotations %v, module %s", p.Annotations, p.Spec.Module)
		}
		if findCondition(p.Status.Conditions, conditionRollback) != nil {
			t.Errorf("the failed rollback's condition outlived the annotation")
		}
		report(t, c, "clusterwide-bad-g3", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
		waitForPolicy(t, c, "bad", "Active on generation 3", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			return p.Status.Phase == kubewardenv1.PhaseActive && p.Status.ServingGeneration == 3
		})
	})

	// A policy a hub policy delivers follows the hub: template sync would restore the hub's spec
	// after a spoke-side rollback. The rollback is refused, saying where to roll back instead.
	t.Run("Rollback_OfAHubDeliveredPolicyIsRefusedAndSaysWhere", func(t *testing.T) {
		liveLeases(t, c, "hubbed", 0)
		p := clusterPolicy("hubbed", "hubbed")
		p.Labels = map[string]string{templatePolicyLabel: "policies.admission", "policy.open-cluster-management.io/cluster-namespace": "cluster1"}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		report(t, c, "clusterwide-hubbed-g1", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
		waitForPolicy(t, c, "hubbed", "Active", func(p *kubewardenv1.ClusterAdmissionPolicy) bool { return p.Status.ServingGeneration == 1 })
		update(t, c, p, func() { p.Spec.Module = "file:///policies/v2.wasm" })
		report(t, c, "clusterwide-hubbed-g2", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
		waitForPolicy(t, c, "hubbed", "Active on 2", func(p *kubewardenv1.ClusterAdmissionPolicy) bool { return p.Status.ServingGeneration == 2 })
		update(t, c, p, func() { p.Annotations = map[string]string{kubewardenv1.RollbackAnnotation: "1"} })
		p = waitForPolicy(t, c, "hubbed", "refuses the rollback", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			r := findCondition(p.Status.Conditions, conditionRollback)
			return r != nil && r.Reason == "ManagedByHub"
		})
		r := findCondition(p.Status.Conditions, conditionRollback)
		if r.Status != metav1.ConditionFalse || !strings.Contains(r.Message, "cluster1/policies.admission") || !strings.Contains(r.Message, "roll back on the hub") {
			t.Errorf("rollback condition = %+v", r)
		}
		if p.Generation != 2 || p.Spec.Module != "file:///policies/v2.wasm" {
			t.Errorf("a hub-delivered policy was rolled back on the spoke: generation %d, module %s", p.Generation, p.Spec.Module)
		}
	})

	t.Run("RevisionsBeyondKeptCount_CollectedOnceANewerServes", func(t *testing.T) {
		liveLeases(t, c, "gc", 0)
		p := clusterPolicy("gc", "gc")
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		for gen := 2; gen <= 5; gen++ {
			waitForPolicy(t, c, "gc", "scheduled", func(q *kubewardenv1.ClusterAdmissionPolicy) bool {
				s := findCondition(q.Status.Conditions, kubewardenv1.ConditionScheduled)
				return s != nil && s.ObservedGeneration == int64(gen-1)
			})
			update(t, c, p, func() { p.Spec.Module = "file:///policies/v" + string(rune('0'+gen)) + ".wasm" })
		}
		waitForPolicy(t, c, "gc", "scheduled generation 5", func(q *kubewardenv1.ClusterAdmissionPolicy) bool {
			s := findCondition(q.Status.Conditions, kubewardenv1.ConditionScheduled)
			return s != nil && s.ObservedGeneration == 5
		})
		if gens := revisionGenerations(t, c, "clusterwide-gc"); len(gens) != 5 {
			t.Errorf("revisions before anything serves: %v, want all 5 kept", gens)
		}
		report(t, c, "clusterwide-gc-g5", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
		waitForPolicy(t, c, "gc", "serving 5", func(q *kubewardenv1.ClusterAdmissionPolicy) bool { return q.Status.ServingGeneration == 5 })
		eventually(t, "revisions beyond the kept 3 are deleted", func() bool {
			gens := revisionGenerations(t, c, "clusterwide-gc")
			slices.Sort(gens)
			return slices.Equal(gens, []int64{3, 4, 5})
		})
	})

	t.Run("Delete_FinalizerRemovesRevisionsAndWebhooks", func(t *testing.T) {
		liveLeases(t, c, "del", 0)
		p := clusterPolicy("del", "del")
		p.Spec.Mutating = true
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		report(t, c, "clusterwide-del-g1", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
		waitForPolicy(t, c, "del", "Active", func(q *kubewardenv1.ClusterAdmissionPolicy) bool { return q.Status.Phase == kubewardenv1.PhaseActive })
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		if err := c.Get(ctx, client.ObjectKey{Name: webhookName("clusterwide-del")}, m); err != nil {
			t.Fatalf("mutating webhook of a mutating policy: %v", err)
		}
		if err := c.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		eventually(t, "policy, revisions and webhook configurations are gone", func() bool {
			err := c.Get(ctx, client.ObjectKey{Name: "del"}, p)
			mErr := c.Get(ctx, client.ObjectKey{Name: webhookName("clusterwide-del")}, m)
			return client.IgnoreNotFound(err) == nil && err != nil && client.IgnoreNotFound(mErr) == nil && mErr != nil &&
				webhookURL(t, c, "clusterwide-del") == "" && len(revisionGenerations(t, c, "clusterwide-del")) == 0
		})
	})

	t.Run("AdmissionPolicy_WebhookLimitedToItsNamespace", func(t *testing.T) {
		liveLeases(t, c, "ns", 0)
		cp := clusterPolicy("x", "ns")
		p := &kubewardenv1.AdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: "team"}, Spec: cp.Spec.PolicySpec}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		name := referenceTo(namespacedPolicyKind, p).ServerPolicyName()
		report(t, c, name+"-g1", append(readyOn(metav1.ConditionTrue, 0), initializedTrue())...)
		w := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		eventually(t, "webhook configuration of the AdmissionPolicy", func() bool {
			return c.Get(ctx, client.ObjectKey{Name: webhookName(name)}, w) == nil
		})
		if got := w.Webhooks[0].NamespaceSelector.MatchLabels[namespaceNameLabel]; got != testNamespace {
			t.Errorf("namespace selector = %v", w.Webhooks[0].NamespaceSelector)
		}
		if !strings.HasSuffix(*w.Webhooks[0].ClientConfig.URL, "/validate/"+name+"/1") {
			t.Errorf("URL = %s", *w.Webhooks[0].ClientConfig.URL)
		}
		eventually(t, "AdmissionPolicy Active", func() bool {
			return c.Get(ctx, client.ObjectKeyFromObject(p), p) == nil && p.Status.Phase == kubewardenv1.PhaseActive
		})
	})
}
