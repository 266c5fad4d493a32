package configpolicy

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/spoke-addon/templatesync"
)

// TestOCMFields covers the ConfigurationPolicy fields OCM users set for lifecycle and reporting:
// pruneObjectBehavior, recreateOption, recordDiff and customMessage. Template sync runs beside
// the controller so that a template withdrawn by an unmet dependency prunes as a deleted one does.
func TestOCMFields(t *testing.T) {
	hub := fleettest.Hub(t)
	c, _ := startController(t, hub.Config, Options{}, func(mgr ctrl.Manager) error {
		return (&templatesync.Reconciler{Client: mgr.GetClient(), ClusterNamespace: "cluster1",
			Recorder: mgr.GetEventRecorderFor("templatesync")}).SetupWithManager(mgr)
	})

	// prunePolicy enforces two ConfigMaps in ns: "made", which it creates, and "found", which
	// exists before it.
	prunePolicy := func(t *testing.T, ns, behavior string) {
		namespace(t, c, ns, nil)
		apply(t, c, configMap(ns, "found", "{a: b}"))
		apply(t, c, policyYAML(ns, "prune", "enforce", `
pruneObjectBehavior: `+behavior+`
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: made, namespace: `+ns+`}, data: {made: here}}
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: found, namespace: `+ns+`}, data: {a: b}}`))
		state(t, c, ns, "prune", policyv1.Compliant)
	}
	deletePolicy := func(t *testing.T, ns, name string) {
		p := &policyv1.ConfigurationPolicy{}
		p.Namespace, p.Name = ns, name
		if err := c.Delete(context.Background(), p); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the policy is gone", func() bool {
			return apierrors.IsNotFound(c.Get(context.Background(), client.ObjectKeyFromObject(p), p))
		})
	}
	exists := func(t *testing.T, ns, name string) bool {
		_, found := getObject(t, c, "v1", "ConfigMap", ns, name)
		return found
	}

	t.Run("Prune_DeleteIfCreated_DeletesOnlyWhatThePolicyCreated", func(t *testing.T) {
		prunePolicy(t, "prune-ifcreated", "DeleteIfCreated")
		deletePolicy(t, "prune-ifcreated", "prune")
		eventually(t, "made is pruned", func() bool { return !exists(t, "prune-ifcreated", "made") })
		if !exists(t, "prune-ifcreated", "found") {
			t.Fatal("DeleteIfCreated deleted an object the policy did not create")
		}
	})

	t.Run("Prune_DeleteAll_DeletesBoth", func(t *testing.T) {
		prunePolicy(t, "prune-all", "DeleteAll")
		deletePolicy(t, "prune-all", "prune")
		eventually(t, "both are pruned", func() bool {
			return !exists(t, "prune-all", "made") && !exists(t, "prune-all", "found")
		})
	})

	t.Run("Prune_None_KeepsBoth", func(t *testing.T) {
		prunePolicy(t, "prune-none", "None")
		deletePolicy(t, "prune-none", "prune")
		if !exists(t, "prune-none", "made") || !exists(t, "prune-none", "found") {
			t.Fatal("pruneObjectBehavior None deleted objects")
		}
	})

	t.Run("Prune_SwitchedToInform_KeepsBoth", func(t *testing.T) {
		prunePolicy(t, "prune-inform", "DeleteAll")
		p := waitForPolicy(t, c, "prune-inform", "prune", "holding the prune finalizer", func(p *policyv1.ConfigurationPolicy) bool {
			return controllerutil.ContainsFinalizer(p, pruneFinalizer)
		})
		// The controller writes the policy too (finalizer, status): retry on its conflicts.
		err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(p), p); err != nil {
				return err
			}
			p.Spec.RemediationAction = "inform"
			return c.Update(context.Background(), p)
		})
		if err != nil {
			t.Fatal(err)
		}
		waitForPolicy(t, c, "prune-inform", "prune", "without the prune finalizer", func(p *policyv1.ConfigurationPolicy) bool {
			return !controllerutil.ContainsFinalizer(p, pruneFinalizer)
		})
		deletePolicy(t, "prune-inform", "prune")
		if !exists(t, "prune-inform", "made") || !exists(t, "prune-inform", "found") {
			t.Fatal("a policy switched to inform pruned when deleted")
		}
	})

	t.Run("Prune_TemplateRemoved_DeletesItsCreatedObject", func(t *testing.T) {
		prunePolicy(t, "prune-dropped", "DeleteIfCreated")
		apply(t, c, policyYAML("prune-dropped", "prune", "enforce", `
pruneObjectBehavior: DeleteIfCreated
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: found, namespace: prune-dropped}, data: {a: b}}`))
		state(t, c, "prune-dropped", "prune", policyv1.Compliant)
		eventually(t, "made is pruned", func() bool { return !exists(t, "prune-dropped", "made") })
		if !exists(t, "prune-dropped", "found") {
			t.Fatal("found was deleted")
		}
	})

	t.Run("Prune_TemplateWithdrawnByUnmetDependency_DeletesWhatItCreated", func(t *testing.T) {
		namespace(t, c, "cluster1", nil)
		namespace(t, c, "withdraw", nil)
		apply(t, c, configMap("withdraw", "found", "{a: b}"))
		apply(t, c, configMap("cluster1", "gate-open", "{}"))
		apply(t, c, policyYAML("cluster1", "gate", "inform", `
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: gate-open, namespace: cluster1}}`))
		state(t, c, "cluster1", "gate", policyv1.Compliant)
		apply(t, c, `apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: gated, namespace: cluster1}
spec:
  disabled: false
  dependencies:
  - {apiVersion: policy.open-cluster-management.io/v1, kind: ConfigurationPolicy, name: gate, compliance: Compliant}
  policy-templates:
  - objectDefinition:
      apiVersion: policy.open-cluster-management.io/v1
      kind: ConfigurationPolicy
      metadata: {name: managed}
      spec:
        remediationAction: enforce
        pruneObjectBehavior: DeleteIfCreated
        object-templates:
        - complianceType: musthave
          objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: made, namespace: withdraw}}
        - complianceType: musthave
          objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: found, namespace: withdraw}}`)
		state(t, c, "cluster1", "managed", policyv1.Compliant)
		if !exists(t, "withdraw", "made") {
			t.Fatal("the template did not create its object")
		}
		gate, _ := getObject(t, c, "v1", "ConfigMap", "cluster1", "gate-open")
		if err := c.Delete(context.Background(), gate); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the withdrawn template pruned what it created", func() bool {
			err := c.Get(context.Background(), types.NamespacedName{Namespace: "cluster1", Name: "managed"}, &policyv1.ConfigurationPolicy{})
			return apierrors.IsNotFound(err) && !exists(t, "withdraw", "made")
		})
		if !exists(t, "withdraw", "found") {
			t.Fatal("withdrawal deleted an object the policy did not create")
		}
	})

	t.Run("Recreate_ImmutableField_NoneThenIfRequired", func(t *testing.T) {
		namespace(t, c, "recreate-ifreq", nil)
		apply(t, c, configMap("recreate-ifreq", "frozen", "{v: '1'}")+"\nimmutable: true")
		old, _ := getObject(t, c, "v1", "ConfigMap", "recreate-ifreq", "frozen")
		tmpl := func(option string) string {
			return `
object-templates:
- complianceType: musthave
  recreateOption: ` + option + `
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: frozen, namespace: recreate-ifreq}, data: {v: '2'}}`
		}
		apply(t, c, policyYAML("recreate-ifreq", "cm", "enforce", tmpl("None")))
		state(t, c, "recreate-ifreq", "cm", policyv1.NonCompliant,
			`configmaps [frozen] in namespace recreate-ifreq cannot be updated, likely due to immutable fields not matching, you may set spec["object-templates"][].recreateOption to recreate the object`)
		apply(t, c, policyYAML("recreate-ifreq", "cm", "enforce", tmpl("IfRequired")))
		p := state(t, c, "recreate-ifreq", "cm", policyv1.Compliant)
		now, _ := getObject(t, c, "v1", "ConfigMap", "recreate-ifreq", "frozen")
		if now.GetUID() == old.GetUID() || now.Object["data"].(map[string]any)["v"] != "2" {
			t.Fatalf("not recreated with the template's data: %v", now.Object)
		}
		rel := p.Status.RelatedObjects
		if len(rel) != 1 || rel[0].Properties == nil || rel[0].Properties.UID != string(now.GetUID()) || !*rel[0].Properties.CreatedByPolicy {
			t.Fatalf("relatedObjects = %+v", rel)
		}
	})

	t.Run("Recreate_Always_ReplacesAMutableObject", func(t *testing.T) {
		namespace(t, c, "recreate-always", nil)
		apply(t, c, configMap("recreate-always", "app", "{v: '1'}"))
		old, _ := getObject(t, c, "v1", "ConfigMap", "recreate-always", "app")
		apply(t, c, policyYAML("recreate-always", "cm", "enforce", `
object-templates:
- complianceType: musthave
  recreateOption: Always
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: recreate-always}, data: {v: '2'}}`))
		state(t, c, "recreate-always", "cm", policyv1.Compliant)
		now, _ := getObject(t, c, "v1", "ConfigMap", "recreate-always", "app")
		if now.GetUID() == old.GetUID() {
			t.Fatal("recreateOption Always updated in place")
		}
	})

	t.Run("RecordDiff_InStatusForPlainKinds_NeverForSecrets", func(t *testing.T) {
		namespace(t, c, "diff", nil)
		apply(t, c, "apiVersion: v1\nkind: ServiceAccount\nmetadata: {name: sa, namespace: diff}\nautomountServiceAccountToken: false")
		apply(t, c, "apiVersion: v1\nkind: Secret\nmetadata: {name: s, namespace: diff}\nstringData: {password: hunter2}")
		apply(t, c, configMap("diff", "cm", "{k: old}"))
		apply(t, c, policyYAML("diff", "diff", "inform", `
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ServiceAccount, metadata: {name: sa, namespace: diff}, automountServiceAccountToken: true}
- complianceType: musthave
  recordDiff: InStatus
  objectDefinition: {apiVersion: v1, kind: Secret, metadata: {name: s, namespace: diff}, stringData: {password: swordfish}}
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: cm, namespace: diff}, data: {k: new}}`))
		p := state(t, c, "diff", "diff", policyv1.NonCompliant)
		diffs := map[string]string{}
		for _, r := range p.Status.RelatedObjects {
			if r.Properties != nil {
				diffs[r.Object.Kind] = r.Properties.Diff
			}
		}
		if d := diffs["ServiceAccount"]; !strings.Contains(d, "--- diff/sa : existing") || !strings.Contains(d, "-automountServiceAccountToken: false") || !strings.Contains(d, "+automountServiceAccountToken: true") {
			t.Errorf("ServiceAccount diff = %q", d)
		}
		if d := diffs["Secret"]; d != secretDiff {
			t.Errorf("Secret diff = %q", d)
		}
		if d := diffs["ConfigMap"]; d != censoredDiff {
			t.Errorf("ConfigMap diff = %q", d)
		}
	})

	t.Run("CustomMessage_RendersOverRelatedObjects_AndSaysWhyWhenBroken", func(t *testing.T) {
		namespace(t, c, "custom", nil)
		apply(t, c, configMap("custom", "app", "{mode: lax}"))
		body := func(noncompliant string) string {
			return `
customMessage:
  noncompliant: '` + noncompliant + `'
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: custom}, data: {mode: strict}}`
		}
		apply(t, c, policyYAML("custom", "msg", "inform", body(`{{ range .Policy.status.relatedObjects }}{{ .object.kind }} {{ .object.metadata.name }} runs {{ .object.data.mode }}{{ end }}`)))
		state(t, c, "custom", "msg", policyv1.NonCompliant)
		eventNote(t, c, "custom", "msg", "NonCompliant; ConfigMap app runs lax")
		apply(t, c, policyYAML("custom", "msg", "inform", body(`{{ .DefaultMessage `)))
		state(t, c, "custom", "msg", policyv1.NonCompliant)
		eventNote(t, c, "custom", "msg", "NonCompliant; violation - configmaps [app] found but not as specified in namespace custom; failure processing the custom message: failed to parse custom template:")
	})

	t.Run("CustomMessage_IsWhatTheHubReads", func(t *testing.T) {
		// Template sync serves cluster1, which an earlier subtest may have made.
		if err := c.Get(context.Background(), types.NamespacedName{Name: "cluster1"}, &corev1.Namespace{}); apierrors.IsNotFound(err) {
			namespace(t, c, "cluster1", nil)
		}
		namespace(t, c, "custom-hub", nil)
		apply(t, c, configMap("custom-hub", "app", "{mode: lax}"))
		apply(t, c, `apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: custom-hub, namespace: cluster1}
spec:
  disabled: false
  policy-templates:
  - objectDefinition:
      apiVersion: policy.open-cluster-management.io/v1
      kind: ConfigurationPolicy
      metadata: {name: custom-hub}
      spec:
        remediationAction: inform
        customMessage:
          noncompliant: '{{ range .Policy.status.relatedObjects }}{{ .object.metadata.name }} runs {{ .object.data.mode }}{{ end }}'
        object-templates:
        - complianceType: musthave
          objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: custom-hub}, data: {mode: strict}}`)
		var last string
		eventually(t, "the policy's history shows the custom message", func() bool {
			p := &policyv1.Policy{}
			if err := c.Get(context.Background(), types.NamespacedName{Namespace: "cluster1", Name: "custom-hub"}, p); err != nil {
				t.Fatal(err)
			}
			for _, d := range p.Status.Details {
				if d != nil && len(d.History) > 0 {
					last = d.History[0].Message
				}
			}
			return last == "NonCompliant; app runs lax"
		})
	})
}

// eventNote waits for a compliance event of the policy whose note starts with prefix.
func eventNote(t *testing.T, c client.Client, ns, name, prefix string) {
	t.Helper()
	eventually(t, "an event saying "+prefix, func() bool {
		list := &eventsv1.EventList{}
		if err := c.List(context.Background(), list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		for _, e := range list.Items {
			if e.Reason == "policy: "+ns+"/"+name && strings.HasPrefix(e.Note, prefix) {
				return true
			}
		}
		return false
	})
}
