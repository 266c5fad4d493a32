package spokeaddon_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/reports"
	spokeaddon "regent.dev/regent/spoke-addon"
	"regent.dev/regent/spoke-addon/specsync"
)

const wait = 30 * time.Second

// TestSpokeAddon runs the addon of cluster1, with the test playing the ConfigurationPolicy
// controller so each compliance is the one the case needs, against a real hub and managed cluster, reaching the
// hub through a proxy the test can cut, with the hub identity it has in production.
func TestSpokeAddon(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}, {Name: "cluster2"}}})
	hubAdmin := newClient(t, f.Hub.Config)
	local := newClient(t, f.Managed[0].Config)
	identity := addonHubIdentity(t, f.Hub, "cluster1")
	px, viaProxy := startProxy(t, identity)

	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := spokeaddon.New(spokeaddon.Options{Hub: viaProxy, Local: f.Managed[0].Config, ClusterName: "cluster1",
		ExternalConfigPolicy: true})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("addon stopped with %v", err)
		}
	})

	s := &suite{t: t, hub: hubAdmin, local: local}

	t.Run("HubIdentityReachesOnlyItsOwnClusterNamespace", func(t *testing.T) {
		c := newClient(t, identity)
		if err := c.List(ctx, &policyv1.PolicyList{}, client.InNamespace("cluster1")); err != nil {
			t.Errorf("list own namespace: %v", err)
		}
		if err := c.List(ctx, &policyv1.PolicyList{}, client.InNamespace("cluster2")); !apierrors.IsForbidden(err) {
			t.Errorf("list cluster2's policies = %v, want Forbidden", err)
		}
		other := &policyv1.Policy{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "cluster2", Name: "x"}, other); !apierrors.IsForbidden(err) {
			t.Errorf("get in cluster2 = %v, want Forbidden", err)
		}
		p := s.replica(t, "rbac-probe", nil)
		p.Namespace = "cluster2"
		p.ResourceVersion = ""
		if err := c.Create(ctx, p); !apierrors.IsForbidden(err) {
			t.Errorf("create in cluster2 = %v, want Forbidden", err)
		}
	})

	t.Run("ReportsAggregatorMergesTheClustersReports", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster1", Name: "report-subject"}}
		if err := local.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		res := reports.Resource{APIVersion: "v1", Kind: "ConfigMap", Namespace: cm.Namespace, Name: cm.Name, UID: cm.UID}
		set := []reports.PolicyResults{{Policy: reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeNamespaced, Name: "must-label"},
			Version: "1", Results: []openreportsv1alpha1.ReportResult{{Rule: "labels", Result: "warn"}}}}
		if _, err := reports.Apply(ctx, local, res, reportsv1alpha1.SourceBackground, set, nil); err != nil {
			t.Fatal(err)
		}
		eventually(t, wait, func() (bool, string) {
			var r openreportsv1alpha1.Report
			err := local.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: "pol-must-label"}, &r)
			return err == nil && r.Summary.Warn == 1, fmt.Sprintf("Report cluster1/pol-must-label with one warning (%v)", err)
		})
	})

	t.Run("SpecSyncMirrorsCreateUpdateDeleteAndRevertsLocalEdits", func(t *testing.T) {
		p := s.createReplica(t, "mirror", nil)
		s.localPolicy(t, p.Name, func(l *policyv1.Policy) (bool, string) {
			return l.Annotations[specsync.HubGenerationAnnotation] == "1", "local copy at hub generation 1"
		})
		s.updateReplica(t, p.Name, func(p *policyv1.Policy) { p.Spec.RemediationAction = policyv1.Enforce })
		s.localPolicy(t, p.Name, func(l *policyv1.Policy) (bool, string) {
			return l.Spec.RemediationAction == policyv1.Enforce && l.Annotations[specsync.HubGenerationAnnotation] == "2",
				fmt.Sprintf("local copy enforce at generation 2, have %s %v", l.Spec.RemediationAction, l.Annotations)
		})
		// Someone edits the copy on the managed cluster: it is put back.
		fleettest.Edit(t, local, &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name}},
			func(l *policyv1.Policy) { l.Spec.RemediationAction = policyv1.Inform })
		s.localPolicy(t, p.Name, func(l *policyv1.Policy) (bool, string) {
			return l.Spec.RemediationAction == policyv1.Enforce, "local edit reverted to the hub's enforce"
		})
		if err := hubAdmin.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
		s.localGone(t, p.Name)
	})

	t.Run("PlantedReplicaNeverReachesTheCluster", s.plantedReplicaNeverReachesTheCluster)

	t.Run("EncryptionKeyReachesTheCluster", s.encryptionKeyReachesTheCluster)

	t.Run("ManagedClustersCopyShowsTheHubsRolloutStatus", func(t *testing.T) { s.rolloutStatusReachesTheCopy(t, f.Managed[0].Config) })

	t.Run("StatusReachesTheHubWithTheGenerationEvaluated", func(t *testing.T) {
		p := s.createReplica(t, "status", nil)
		s.playConfigPolicy(t, "status-cfg", policyv1.NonCompliant)
		s.hubPolicy(t, p.Name, func(h *policyv1.Policy) (bool, string) {
			return h.Status.ComplianceState == policyv1.NonCompliant && h.Status.LastEvaluatedGeneration == 1 && len(h.Status.Details) == 1,
				fmt.Sprintf("hub replica NonCompliant at generation 1, have %+v", h.Status)
		})
		s.updateReplica(t, p.Name, func(p *policyv1.Policy) { p.Spec.RemediationAction = policyv1.Enforce })
		// The policy's remediationAction overrides the template's.
		eventually(t, wait, func() (bool, string) {
			cp := &policyv1.ConfigurationPolicy{}
			err := local.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: "status-cfg"}, cp)
			return err == nil && strings.EqualFold(string(cp.Spec.RemediationAction), "enforce"), fmt.Sprintf("template enforced (%v)", err)
		})
		s.playConfigPolicy(t, "status-cfg", policyv1.Compliant)
		s.hubPolicy(t, p.Name, func(h *policyv1.Policy) (bool, string) {
			d := h.Status.Details
			return h.Status.ComplianceState == policyv1.Compliant && h.Status.LastEvaluatedGeneration == 2 &&
					len(d) == 1 && len(d[0].History) == 2,
				fmt.Sprintf("hub replica Compliant at generation 2 with 2 history entries, have %+v %s", h.Status, toJSON(d))
		})
		// Settled: nothing is written again.
		h := &policyv1.Policy{}
		_ = hubAdmin.Get(ctx, client.ObjectKeyFromObject(p), h)
		time.Sleep(2 * time.Second)
		h2 := &policyv1.Policy{}
		_ = hubAdmin.Get(ctx, client.ObjectKeyFromObject(p), h2)
		if h.ResourceVersion != h2.ResourceVersion {
			t.Errorf("hub replica rewritten with nothing changed: %s → %s", h.ResourceVersion, h2.ResourceVersion)
		}
	})

	t.Run("Dependencies", func(t *testing.T) { s.dependencies(t) })

	t.Run("TemplateNameCollision_FirstKeepsItTheOtherIsRefusedAndBothAreTold", func(t *testing.T) { s.templateCollision(t) })

	t.Run("AddonLeaseIsKeptFresh", func(t *testing.T) {
		eventually(t, wait, func() (bool, string) {
			l := &coordinationv1.Lease{}
			err := local.Get(ctx, types.NamespacedName{Namespace: spokeaddon.DefaultInstallNamespace, Name: spokeaddon.AddonName}, l)
			return err == nil && l.Spec.RenewTime != nil, fmt.Sprintf("addon Lease renewed: %v", err)
		})
	})

	t.Run("HubOutageKeepsLastPoliciesAndConverges", func(t *testing.T) {
		kept := s.createReplica(t, "kept", nil)
		changed := s.createReplica(t, "changed", nil)
		removed := s.createReplica(t, "removed", nil)
		for _, p := range []*policyv1.Policy{kept, changed, removed} {
			s.localPolicy(t, p.Name, func(*policyv1.Policy) (bool, string) { return true, "" })
		}
		px.cut()
		s.updateReplica(t, changed.Name, func(p *policyv1.Policy) { p.Spec.RemediationAction = policyv1.Enforce })
		if err := hubAdmin.Delete(ctx, removed); err != nil {
			t.Fatal(err)
		}
		added := s.createReplica(t, "added", nil)
		time.Sleep(3 * time.Second)
		// Cut off, the cluster keeps what it had.
		for _, name := range []string{kept.Name, changed.Name, removed.Name} {
			l := &policyv1.Policy{}
			if err := local.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: name}, l); err != nil {
				t.Errorf("%s lost while the hub was away: %v", name, err)
			}
		}
		px.restore()
		s.localPolicy(t, changed.Name, func(l *policyv1.Policy) (bool, string) {
			return l.Spec.RemediationAction == policyv1.Enforce, "change made during the outage arrives"
		})
		s.localPolicy(t, added.Name, func(*policyv1.Policy) (bool, string) { return true, "" })
		s.localGone(t, removed.Name)
		list := &policyv1.PolicyList{}
		if err := local.List(ctx, list, client.InNamespace("cluster1")); err != nil {
			t.Fatal(err)
		}
		seen := map[string]int{}
		for _, p := range list.Items {
			seen[p.Name]++
			if seen[p.Name] > 1 {
				t.Errorf("%s duplicated", p.Name)
			}
		}
	})
}

type suite struct {
	t          *testing.T
	hub, local client.Client
}

// replica builds a hub replica of root policy default/<name> for cluster1 with one
// ConfigurationPolicy template <name>-cfg.
func (s *suite) replica(t *testing.T, name string, mutate func(*policyv1.Policy)) *policyv1.Policy {
	t.Helper()
	p := &policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: "default." + name, Namespace: "cluster1", Labels: map[string]string{
			"policy.open-cluster-management.io/root-policy":       "default." + name,
			"policy.open-cluster-management.io/cluster-name":      "cluster1",
			"policy.open-cluster-management.io/cluster-namespace": "cluster1",
		}},
		Spec: policyv1.PolicySpec{
			RemediationAction: policyv1.Inform,
			PolicyTemplates:   []*policyv1.PolicyTemplate{template(name + "-cfg")},
		},
	}
	if mutate != nil {
		mutate(p)
	}
	return p
}

func template(name string) *policyv1.PolicyTemplate {
	raw, _ := json.Marshal(map[string]any{
		"apiVersion": "policy.open-cluster-management.io/v1",
		"kind":       "ConfigurationPolicy",
		"metadata":   map[string]any{"name": name},
		"spec": map[string]any{"remediationAction": "inform", "severity": "low", "object-templates": []any{
			map[string]any{"complianceType": "musthave", "objectDefinition": map[string]any{
				"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name}}},
		}},
	})
	return &policyv1.PolicyTemplate{ObjectDefinition: runtime.RawExtension{Raw: raw}}
}

func (s *suite) createReplica(t *testing.T, name string, mutate func(*policyv1.Policy)) *policyv1.Policy {
	t.Helper()
	p := s.replica(t, name, mutate)
	if err := s.hub.Create(context.Background(), p); err != nil {
		t.Fatalf("create replica %s: %v", p.Name, err)
	}
	acknowledge(t, s.hub, p)
	return p
}

// acknowledge gives a replica a rollout status, as the hub's propagator does once its cluster's
// status moves past the initial one: that vouches for it even without the replica labels.
func acknowledge(t *testing.T, hub client.Client, p *policyv1.Policy) {
	t.Helper()
	patch := []byte(`{"status":{"rolloutStatus":"Progressing"}}`)
	if err := hub.Status().Patch(context.Background(), p, client.RawPatch(types.MergePatchType, patch)); err != nil {
		t.Fatalf("acknowledge replica %s: %v", p.Name, err)
	}
}

func (s *suite) updateReplica(t *testing.T, name string, change func(*policyv1.Policy)) {
	t.Helper()
	eventually(t, wait, func() (bool, string) {
		p := &policyv1.Policy{}
		if err := s.hub.Get(context.Background(), types.NamespacedName{Namespace: "cluster1", Name: name}, p); err != nil {
			return false, err.Error()
		}
		change(p)
		err := s.hub.Update(context.Background(), p)
		return err == nil, fmt.Sprintf("update %s: %v", name, err)
	})
}

func (s *suite) localPolicy(t *testing.T, name string, cond func(*policyv1.Policy) (bool, string)) {
	t.Helper()
	eventually(t, wait, func() (bool, string) {
		l := &policyv1.Policy{}
		if err := s.local.Get(context.Background(), types.NamespacedName{Namespace: "cluster1", Name: name}, l); err != nil {
			return false, fmt.Sprintf("local %s: %v", name, err)
		}
		return cond(l)
	})
}

func (s *suite) hubPolicy(t *testing.T, name string, cond func(*policyv1.Policy) (bool, string)) {
	t.Helper()
	eventually(t, wait, func() (bool, string) {
		h := &policyv1.Policy{}
		if err := s.hub.Get(context.Background(), types.NamespacedName{Namespace: "cluster1", Name: name}, h); err != nil {
			return false, fmt.Sprintf("hub %s: %v", name, err)
		}
		return cond(h)
	})
}

func (s *suite) localGone(t *testing.T, name string) {
	t.Helper()
	eventually(t, wait, func() (bool, string) {
		err := s.local.Get(context.Background(), types.NamespacedName{Namespace: "cluster1", Name: name}, &policyv1.Policy{})
		return apierrors.IsNotFound(err), fmt.Sprintf("local %s still there (%v)", name, err)
	})
}

// playConfigPolicy acts as the ConfigurationPolicy controller: once the template object exists
// it reports state at the object's current generation.
func (s *suite) playConfigPolicy(t *testing.T, name string, state policyv1.ComplianceState) {
	t.Helper()
	eventually(t, wait, func() (bool, string) {
		cp := &policyv1.ConfigurationPolicy{}
		if err := s.local.Get(context.Background(), types.NamespacedName{Namespace: "cluster1", Name: name}, cp); err != nil {
			return false, fmt.Sprintf("template %s: %v", name, err)
		}
		cp.Status.ComplianceState = state
		cp.Status.LastEvaluatedGeneration = cp.Generation
		err := s.local.Status().Update(context.Background(), cp)
		return err == nil, fmt.Sprintf("report %s on %s: %v", state, name, err)
	})
}

func (s *suite) templateExists(t *testing.T, name string, want bool) {
	t.Helper()
	eventually(t, wait, func() (bool, string) {
		err := s.local.Get(context.Background(), types.NamespacedName{Namespace: "cluster1", Name: name}, &policyv1.ConfigurationPolicy{})
		return (err == nil) == want, fmt.Sprintf("template %s exists=%v, want %v", name, err == nil, want)
	})
}

func (s *suite) pendingWith(t *testing.T, policy string, fragments ...string) {
	t.Helper()
	s.localPolicy(t, policy, func(l *policyv1.Policy) (bool, string) {
		if l.Status.ComplianceState != policyv1.Pending || len(l.Status.Details) == 0 || len(l.Status.Details[0].History) == 0 {
			return false, fmt.Sprintf("%s Pending, have %+v", policy, l.Status)
		}
		msg := l.Status.Details[0].History[0].Message
		for _, f := range fragments {
			if !strings.Contains(msg, f) {
				return false, fmt.Sprintf("%s message %q lacks %q", policy, msg, f)
			}
		}
		return true, ""
	})
}

// dependsOn builds a dependency as OCM's schema requires it: apiVersion, kind, name and compliance
// (Compliant when not given).
func dependsOn(kind, name, ns string, compliance policyv1.ComplianceState) policyv1.PolicyDependency {
	if compliance == "" {
		compliance = policyv1.Compliant
	}
	d := policyv1.PolicyDependency{Name: name, Namespace: ns, Compliance: compliance}
	d.Kind = kind
	d.APIVersion = policyv1.GroupVersion.String()
	if kind == "ConfigMap" {
		d.APIVersion = "v1"
	}
	return d
}

func (s *suite) dependencies(t *testing.T) {
	ctx := context.Background()
	t.Run("UnmetUntilTheDependencyIsCompliantThenAppliedThenWithdrawnOnRegression", func(t *testing.T) {
		s.createReplica(t, "base", nil)
		s.createReplica(t, "app", func(p *policyv1.Policy) {
			p.Spec.Dependencies = []policyv1.PolicyDependency{dependsOn("Policy", "base", "", policyv1.Compliant)}
		})
		s.playConfigPolicy(t, "base-cfg", policyv1.NonCompliant)
		s.pendingWith(t, "default.app", "Policy cluster1/default.base compliance is NonCompliant, want Compliant")
		s.templateExists(t, "app-cfg", false)
		s.playConfigPolicy(t, "base-cfg", policyv1.Compliant)
		s.templateExists(t, "app-cfg", true)
		s.playConfigPolicy(t, "base-cfg", policyv1.NonCompliant)
		s.templateExists(t, "app-cfg", false)
		s.pendingWith(t, "default.app", "compliance is NonCompliant, want Compliant")
	})
	t.Run("NotFound", func(t *testing.T) {
		s.createReplica(t, "orphan", func(p *policyv1.Policy) {
			p.Spec.Dependencies = []policyv1.PolicyDependency{dependsOn("Policy", "nowhere", "other", "")}
		})
		s.pendingWith(t, "default.orphan", "Policy cluster1/other.nowhere not found")
	})
	t.Run("NoComplianceStatusThenFound", func(t *testing.T) {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "flag", Namespace: "cluster1"}}
		if err := s.local.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
		s.createReplica(t, "flagged", func(p *policyv1.Policy) {
			p.Spec.PolicyTemplates[0].ExtraDependencies = []policyv1.PolicyDependency{dependsOn("ConfigMap", "flag", "", policyv1.Compliant)}
		})
		s.pendingWith(t, "default.flagged", "ConfigMap cluster1/flag has no compliance status")
	})
	t.Run("ExtraDependencyOnAConfigurationPolicy", func(t *testing.T) {
		s.createReplica(t, "second", func(p *policyv1.Policy) {
			p.Spec.PolicyTemplates[0].ExtraDependencies = []policyv1.PolicyDependency{dependsOn("ConfigurationPolicy", "first-cfg", "", policyv1.Compliant)}
		})
		s.pendingWith(t, "default.second", "ConfigurationPolicy cluster1/first-cfg not found")
		s.createReplica(t, "first", nil)
		s.playConfigPolicy(t, "first-cfg", policyv1.Compliant)
		s.templateExists(t, "second-cfg", true)
	})
	t.Run("IgnorePendingReportsCompliant", func(t *testing.T) {
		s.createReplica(t, "patient", func(p *policyv1.Policy) {
			p.Spec.PolicyTemplates[0].IgnorePending = true
			p.Spec.Dependencies = []policyv1.PolicyDependency{dependsOn("Policy", "never", "", "")}
		})
		s.localPolicy(t, "default.patient", func(l *policyv1.Policy) (bool, string) {
			return l.Status.ComplianceState == policyv1.Compliant && len(l.Status.Details) == 1 &&
					strings.Contains(l.Status.Details[0].History[0].Message, "ignorePending"),
				fmt.Sprintf("Compliant by ignorePending, have %+v", l.Status)
		})
		s.templateExists(t, "patient-cfg", false)
	})
	t.Run("CycleIsNamed", func(t *testing.T) {
		s.createReplica(t, "chicken", func(p *policyv1.Policy) {
			p.Spec.Dependencies = []policyv1.PolicyDependency{dependsOn("Policy", "egg", "", "")}
		})
		s.createReplica(t, "egg", func(p *policyv1.Policy) {
			p.Spec.Dependencies = []policyv1.PolicyDependency{dependsOn("Policy", "chicken", "", "")}
		})
		s.pendingWith(t, "default.chicken", "cycle: default.chicken → default.egg → default.chicken")
		s.pendingWith(t, "default.egg", "cycle: default.egg → default.chicken → default.egg")
	})
}

// templateCollision: two roots ship a ConfigurationPolicy of the same name to cluster1. The
// first keeps it; the second is NonCompliant naming the first, never takes it over, and an event
// on each policy says so (OCM's "Template name must be unique").
func (s *suite) templateCollision(t *testing.T) {
	ctx := context.Background()
	shared := func(p *policyv1.Policy) { p.Spec.PolicyTemplates = []*policyv1.PolicyTemplate{template("shared-cfg")} }
	first := s.createReplica(t, "first-team", shared)
	controller := func() (string, string) {
		cp := &policyv1.ConfigurationPolicy{}
		if err := s.local.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: "shared-cfg"}, cp); err != nil {
			return "", err.Error()
		}
		if ref := metav1.GetControllerOf(cp); ref != nil {
			return ref.Name, cp.Labels["policy.open-cluster-management.io/policy"]
		}
		return "", cp.Labels["policy.open-cluster-management.io/policy"]
	}
	eventually(t, wait, func() (bool, string) {
		owner, label := controller()
		return owner == first.Name && label == first.Name, fmt.Sprintf("shared-cfg controlled by %s, have %q labelled %q", first.Name, owner, label)
	})
	second := s.createReplica(t, "second-team", shared)
	s.localPolicy(t, second.Name, func(l *policyv1.Policy) (bool, string) {
		d := l.Status.Details
		ok := l.Status.ComplianceState == policyv1.NonCompliant && len(d) == 1 && len(d[0].History) > 0 &&
			strings.Contains(d[0].History[0].Message, "Template name must be unique") &&
			strings.Contains(d[0].History[0].Message, "already exists in policy "+first.Name)
		return ok, fmt.Sprintf("%s NonCompliant naming %s, have %s %s", second.Name, first.Name, l.Status.ComplianceState, toJSON(d))
	})
	eventually(t, wait, func() (bool, string) {
		list := &corev1.EventList{}
		if err := s.local.List(ctx, list, client.InNamespace("cluster1")); err != nil {
			return false, err.Error()
		}
		told := map[string]bool{}
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "Template name must be unique") {
				told[e.InvolvedObject.Name] = true
			}
		}
		return told[first.Name] && told[second.Name], fmt.Sprintf("a collision event on both policies, have %v", told)
	})
	// The second policy's reconciles left the object as the first one made it.
	if owner, label := controller(); owner != first.Name || label != first.Name {
		t.Errorf("shared-cfg controlled by %q labelled %q, want %s", owner, label, first.Name)
	}

	// The first policy goes, and with it its object: the fleet's garbage collector deletes it,
	// often before this test does (so a NotFound is expected here); the refused policy takes the
	// template over.
	if err := s.hub.Delete(ctx, first); err != nil {
		t.Fatal(err)
	}
	s.localGone(t, first.Name)
	if err := s.local.Delete(ctx, &policyv1.ConfigurationPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster1", Name: "shared-cfg"}}); client.IgnoreNotFound(err) != nil {
		t.Fatal(err)
	}
	eventually(t, wait, func() (bool, string) {
		owner, label := controller()
		return owner == second.Name && label == second.Name, fmt.Sprintf("shared-cfg taken over by %s, have %q labelled %q", second.Name, owner, label)
	})
}
