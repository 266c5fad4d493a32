package configpolicy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/spoke-addon/compliancemessage"
)

// policyYAML is a ConfigurationPolicy in ns with the given remediation and YAML body under spec.
func policyYAML(ns, name, remediation, spec string) string {
	return fmt.Sprintf(`apiVersion: policy.open-cluster-management.io/v1
kind: ConfigurationPolicy
metadata: {name: %s, namespace: %s}
spec:
  remediationAction: %s
  severity: low
%s`, name, ns, remediation, indent(spec, "  "))
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(strings.TrimSpace(s), "\n", "\n"+prefix)
}

func configMap(ns, name, data string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s, namespace: %s}\ndata: %s", name, ns, data)
}

// TestConfigurationPolicy runs every controller behaviour against one real apiserver; each
// subtest owns its namespaces.
func TestConfigurationPolicy(t *testing.T) {
	hub := fleettest.Hub(t)
	c, log := startController(t, hub.Config, Options{})

	t.Run("GovernanceInfoFollowsCompliance", func(t *testing.T) { testGovernanceInfoFollowsCompliance(t, c) })

	t.Run("MustHave_Inform_ReportsMissingThenFollowsTheObjectThroughWatches", func(t *testing.T) {
		namespace(t, c, "inform-musthave", nil)
		apply(t, c, policyYAML("inform-musthave", "cm", "inform", `
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: inform-musthave}, data: {mode: strict}}`))
		state(t, c, "inform-musthave", "cm", policyv1.NonCompliant, "configmaps [app] not found in namespace inform-musthave")
		if _, found := getObject(t, c, "v1", "ConfigMap", "inform-musthave", "app"); found {
			t.Fatal("inform created the object")
		}
		// No periodic loop exists: only the watch on ConfigMaps can bring these changes in.
		apply(t, c, configMap("inform-musthave", "app", "{mode: strict, extra: kept}"))
		p := state(t, c, "inform-musthave", "cm", policyv1.Compliant, "configmaps [app] found as specified in namespace inform-musthave")
		rel := p.Status.RelatedObjects
		if len(rel) != 1 || rel[0].Object.Kind != "ConfigMap" || rel[0].Object.Metadata.Name != "app" || rel[0].Compliant != "Compliant" || rel[0].Reason != "Resource found as expected" {
			t.Errorf("relatedObjects = %+v", rel)
		}
		apply(t, c, configMap("inform-musthave", "app", "{mode: lax}"))
		state(t, c, "inform-musthave", "cm", policyv1.NonCompliant, "configmaps [app] found but not as specified in namespace inform-musthave")
	})

	t.Run("MustHave_Enforce_CreatesThenRepairsDrift", func(t *testing.T) {
		namespace(t, c, "enforce-musthave", nil)
		apply(t, c, configMap("enforce-musthave", "app", "{other: value}"))
		apply(t, c, policyYAML("enforce-musthave", "cm", "Enforce", `
object-templates:
- complianceType: MustHave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: created, namespace: enforce-musthave, labels: {team: a}}, data: {mode: strict}}
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: enforce-musthave}, data: {mode: strict}}`))
		state(t, c, "enforce-musthave", "cm", policyv1.Compliant)
		created, found := getObject(t, c, "v1", "ConfigMap", "enforce-musthave", "created")
		if !found || created.GetLabels()["team"] != "a" {
			t.Fatalf("enforce did not create the ConfigMap with its labels: %v", created)
		}
		app, _ := getObject(t, c, "v1", "ConfigMap", "enforce-musthave", "app")
		if data, _, _ := unstructured.NestedStringMap(app.Object, "data"); data["mode"] != "strict" || data["other"] != "value" {
			t.Errorf("musthave update did not merge: data = %v", data)
		}
		// Drift is repaired by the watch, not a loop.
		apply(t, c, configMap("enforce-musthave", "created", "{mode: lax}"))
		eventually(t, "the drifted ConfigMap is repaired", func() bool {
			obj, _ := getObject(t, c, "v1", "ConfigMap", "enforce-musthave", "created")
			mode, _, _ := unstructured.NestedString(obj.Object, "data", "mode")
			return mode == "strict" && obj.GetLabels()["team"] == "a"
		})
		state(t, c, "enforce-musthave", "cm", policyv1.Compliant)
	})

	t.Run("MustOnlyHave_InformReportsExtraFields_EnforceRemovesThem", func(t *testing.T) {
		namespace(t, c, "onlyhave", nil)
		apply(t, c, configMap("onlyhave", "app", "{mode: strict, extra: drop}"))
		apply(t, c, policyYAML("onlyhave", "cm", "inform", `
object-templates:
- complianceType: mustonlyhave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: onlyhave}, data: {mode: strict}}`))
		state(t, c, "onlyhave", "cm", policyv1.NonCompliant, "configmaps [app] found but not as specified in namespace onlyhave")
		apply(t, c, policyYAML("onlyhave", "cm", "enforce", `
object-templates:
- complianceType: mustonlyhave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: onlyhave}, data: {mode: strict}}`))
		state(t, c, "onlyhave", "cm", policyv1.Compliant)
		app, _ := getObject(t, c, "v1", "ConfigMap", "onlyhave", "app")
		if data, _, _ := unstructured.NestedStringMap(app.Object, "data"); len(data) != 1 || data["mode"] != "strict" {
			t.Errorf("mustonlyhave enforce left data = %v", data)
		}
	})

	t.Run("MustOnlyHave_ServerDefaultsDoNotMakeAnObjectNonCompliant", func(t *testing.T) {
		namespace(t, c, "defaults", nil)
		// The apiserver adds protocol: TCP to every port; the template does not name it.
		apply(t, c, policyYAML("defaults", "svc", "enforce", `
object-templates:
- complianceType: mustonlyhave
  objectDefinition:
    apiVersion: v1
    kind: Service
    metadata: {name: web, namespace: defaults}
    spec:
      ports: [{port: 80}]
      selector: {app: web}`))
		state(t, c, "defaults", "svc", policyv1.Compliant)
		p := state(t, c, "defaults", "svc", policyv1.Compliant, "services [web] found as specified in namespace defaults")
		if len(p.Status.RelatedObjects) != 1 || p.Status.RelatedObjects[0].Properties == nil || !*p.Status.RelatedObjects[0].Properties.CreatedByPolicy {
			t.Errorf("relatedObjects do not say the policy created the Service: %+v", p.Status.RelatedObjects)
		}
	})

	t.Run("MustNotHave_InformReports_EnforceDeletes", func(t *testing.T) {
		namespace(t, c, "nothave", nil)
		apply(t, c, configMap("nothave", "forbidden", "{a: b}"))
		apply(t, c, policyYAML("nothave", "cm", "inform", `
object-templates:
- complianceType: mustnothave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: forbidden, namespace: nothave}}`))
		state(t, c, "nothave", "cm", policyv1.NonCompliant, "configmaps [forbidden] found in namespace nothave")
		apply(t, c, policyYAML("nothave", "cm", "enforce", `
object-templates:
- complianceType: mustnothave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: forbidden, namespace: nothave}}`))
		state(t, c, "nothave", "cm", policyv1.Compliant)
		eventually(t, "the forbidden ConfigMap is deleted", func() bool {
			_, found := getObject(t, c, "v1", "ConfigMap", "nothave", "forbidden")
			return !found
		})
		state(t, c, "nothave", "cm", policyv1.Compliant, "configmaps [forbidden] missing as expected in namespace nothave")
	})

	t.Run("MustNotHave_WithoutName_MatchesEveryObjectOfTheKindByContent", func(t *testing.T) {
		namespace(t, c, "bykind", nil)
		apply(t, c, `apiVersion: v1
kind: ConfigMap
metadata: {name: bad-1, namespace: bykind, labels: {check: FAIL}}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: good, namespace: bykind, labels: {check: PASS}}`)
		apply(t, c, policyYAML("bykind", "results", "inform", `
object-templates:
- complianceType: mustnothave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {namespace: bykind, labels: {check: FAIL}}}`))
		state(t, c, "bykind", "results", policyv1.NonCompliant, "configmaps [bad-1] found in namespace bykind")
		apply(t, c, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: bad-1, namespace: bykind, labels: {check: PASS}}")
		state(t, c, "bykind", "results", policyv1.Compliant, "configmaps [-] missing as expected in namespace bykind")
	})

	t.Run("ClusterScoped_EnforceCreatesNamespace_InformFindsClusterRole", func(t *testing.T) {
		namespace(t, c, "cluster-scoped", nil)
		apply(t, c, policyYAML("cluster-scoped", "ns", "enforce", `
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: Namespace, metadata: {name: prod}}
- complianceType: mustnothave
  objectDefinition: {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: too-powerful}}`))
		// "was created successfully" is transient: the Namespace's own event re-evaluates the policy.
		state(t, c, "cluster-scoped", "ns", policyv1.Compliant, "namespaces [prod] found as specified", "clusterroles [too-powerful] missing as expected")
		if _, found := getObject(t, c, "v1", "Namespace", "", "prod"); !found {
			t.Fatal("namespace prod not created")
		}
		apply(t, c, policyYAML("cluster-scoped", "role", "inform", `
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: admin}, rules: [{verbs: ["*"], apiGroups: ["*"], resources: ["*"]}]}`))
		state(t, c, "cluster-scoped", "role", policyv1.NonCompliant, "clusterroles [admin] found but not as specified")
	})

	t.Run("NamespaceSelector_IncludeExcludeWildcardsAndLabels", func(t *testing.T) {
		namespace(t, c, "selector", nil)
		namespace(t, c, "sel-a", map[string]string{"env": "prod"})
		namespace(t, c, "sel-b", map[string]string{"env": "prod", "team": "b"})
		namespace(t, c, "sel-c", map[string]string{"env": "dev"})
		apply(t, c, policyYAML("selector", "wild", "inform", `
namespaceSelector: {include: ["sel-*"], exclude: ["sel-c"]}
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: marker}}`))
		state(t, c, "selector", "wild", policyv1.NonCompliant, "configmaps [marker] not found in namespace sel-a", "configmaps [marker] not found in namespace sel-b")
		p := state(t, c, "selector", "wild", policyv1.NonCompliant)
		if strings.Contains(compliancemessage.Of(p.Status), "sel-c") {
			t.Errorf("excluded namespace in message: %s", compliancemessage.Of(p.Status))
		}
		apply(t, c, policyYAML("selector", "labels", "enforce", `
namespaceSelector:
  matchLabels: {env: prod}
  matchExpressions: [{key: team, operator: DoesNotExist}]
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: marker}, data: {by: labels}}`))
		state(t, c, "selector", "labels", policyv1.Compliant)
		for ns, want := range map[string]bool{"sel-a": true, "sel-b": false, "sel-c": false, "selector": false} {
			if _, found := getObject(t, c, "v1", "ConfigMap", ns, "marker"); found != want {
				t.Errorf("marker in %s: %v, want %v", ns, found, want)
			}
		}
		// A namespace that starts to match is picked up from the namespace watch.
		namespace(t, c, "sel-d", map[string]string{"env": "prod"})
		eventually(t, "marker created in the new namespace sel-d", func() bool {
			_, found := getObject(t, c, "v1", "ConfigMap", "sel-d", "marker")
			return found
		})
		state(t, c, "selector", "wild", policyv1.NonCompliant, "configmaps [marker] found as specified in namespace sel-a", "configmaps [marker] found as specified in namespace sel-d", "not found in namespace sel-b")
	})

	t.Run("LastEvaluatedGeneration_FollowsSpecChanges", func(t *testing.T) {
		namespace(t, c, "generation", nil)
		tmpl := `
object-templates:
- complianceType: mustnothave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: %s, namespace: generation}}`
		apply(t, c, policyYAML("generation", "gen", "inform", fmt.Sprintf(tmpl, "one")))
		p := state(t, c, "generation", "gen", policyv1.Compliant, "configmaps [one] missing")
		first := p.Status.LastEvaluatedGeneration
		apply(t, c, policyYAML("generation", "gen", "inform", fmt.Sprintf(tmpl, "two")))
		p = state(t, c, "generation", "gen", policyv1.Compliant, "configmaps [two] missing")
		if p.Status.LastEvaluatedGeneration <= first || p.Status.LastEvaluatedGeneration != p.Generation {
			t.Errorf("lastEvaluatedGeneration = %d after %d, generation %d", p.Status.LastEvaluatedGeneration, first, p.Generation)
		}
	})

	t.Run("UnchangedEvaluation_WritesNoStatus", func(t *testing.T) {
		namespace(t, c, "nowrite", nil)
		apply(t, c, configMap("nowrite", "app", "{mode: strict}"))
		apply(t, c, policyYAML("nowrite", "cm", "inform", `
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: nowrite}, data: {mode: strict}}`))
		p := state(t, c, "nowrite", "cm", policyv1.Compliant)
		key := types.NamespacedName{Namespace: "nowrite", Name: "cm"}
		eventually(t, "the policy settles", func() bool { n, _ := log.get(key); return n > 0 })
		evaluated, written := log.get(key)
		// A change the template does not care about re-evaluates the policy but changes nothing.
		apply(t, c, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app, namespace: nowrite, labels: {unrelated: x}}\ndata: {mode: strict}")
		eventually(t, "the policy is evaluated again", func() bool { n, _ := log.get(key); return n > evaluated })
		if _, w := log.get(key); w != written {
			t.Errorf("status written %d more times for an unchanged result", w-written)
		}
		again := state(t, c, "nowrite", "cm", policyv1.Compliant)
		if again.ResourceVersion != p.ResourceVersion {
			t.Errorf("resourceVersion moved from %s to %s", p.ResourceVersion, again.ResourceVersion)
		}
	})

	t.Run("UnknownKind_IsNonCompliantNamingTheKind", func(t *testing.T) {
		namespace(t, c, "unknown", nil)
		apply(t, c, policyYAML("unknown", "scc", "enforce", `
object-templates:
- complianceType: musthave
  objectDefinition: {apiVersion: security.openshift.io/v1, kind: SecurityContextConstraints, metadata: {name: restricted}}
- complianceType: musthave
  objectDefinition: {apiVersion: policy/v1beta1, kind: PodSecurityPolicy, metadata: {name: old}}
- complianceType: musthave
  objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: fine, namespace: unknown}}`))
		p := state(t, c, "unknown", "scc", policyv1.NonCompliant,
			"couldn't find mapping resource with kind SecurityContextConstraints",
			"couldn't find mapping resource with kind PodSecurityPolicy",
			"configmaps [fine] ")
		if got := p.Status.CompliancyDetails[2].ComplianceState; got != policyv1.Compliant {
			t.Errorf("the template of a known kind is %s", got)
		}
	})

	t.Run("ObjectTemplatesRaw_IsEvaluatedAsObjectTemplates", func(t *testing.T) {
		namespace(t, c, "raw", nil)
		apply(t, c, policyYAML("raw", "raw", "inform", `
object-templates-raw: |
  - complianceType: musthave
    objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: x, namespace: raw}}`))
		state(t, c, "raw", "raw", policyv1.NonCompliant, "configmaps [x] not found in namespace raw")
	})

	t.Run("ComplianceTransitions_EmitEventsOnThePolicyAndItsParentPolicy", func(t *testing.T) {
		namespace(t, c, "events", nil)
		apply(t, c, `apiVersion: policy.open-cluster-management.io/v1
kind: Policy
metadata: {name: parent, namespace: events}
spec:
  disabled: false
  policy-templates:
  - objectDefinition: {apiVersion: policy.open-cluster-management.io/v1, kind: ConfigurationPolicy, metadata: {name: child}}`)
		parent := &policyv1.Policy{}
		if err := c.Get(context.Background(), types.NamespacedName{Namespace: "events", Name: "parent"}, parent); err != nil {
			t.Fatal(err)
		}
		apply(t, c, fmt.Sprintf(`apiVersion: policy.open-cluster-management.io/v1
kind: ConfigurationPolicy
metadata:
  name: child
  namespace: events
  ownerReferences: [{apiVersion: policy.open-cluster-management.io/v1, kind: Policy, name: parent, uid: %s}]
spec:
  remediationAction: inform
  object-templates:
  - complianceType: musthave
    objectDefinition: {apiVersion: v1, kind: ConfigMap, metadata: {name: app, namespace: events}}`, parent.UID))
		state(t, c, "events", "child", policyv1.NonCompliant)
		apply(t, c, configMap("events", "app", "{}"))
		state(t, c, "events", "child", policyv1.Compliant)
		eventually(t, "a Warning and a Normal event on the ConfigurationPolicy and on the parent Policy", func() bool {
			list := &eventsv1.EventList{}
			if err := c.List(context.Background(), list, client.InNamespace("events")); err != nil {
				t.Fatal(err)
			}
			seen := map[string]bool{}
			for _, e := range list.Items {
				if e.Reason == "policy: events/child" {
					seen[e.Regarding.Kind+"/"+e.Type+"/"+strings.SplitN(e.Note, ";", 2)[0]] = true
				}
			}
			return seen["ConfigurationPolicy/Warning/NonCompliant"] && seen["ConfigurationPolicy/Normal/Compliant"] &&
				seen["Policy/Warning/NonCompliant"] && seen["Policy/Normal/Compliant"]
		})
	})

	t.Run("EveryPolicyCollectionTemplateEvaluates", func(t *testing.T) { testPolicyCollection(t, c) })

	t.Run("EnforcedPolicyCollectionTemplatesConverge", func(t *testing.T) { testPolicyCollectionEnforced(t, c) })
}
