package v1_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/test/corpora"
)

// TestPolicyAPI runs every API check against one real hub apiserver.
func TestPolicyAPI(t *testing.T) {
	hub := fleettest.Hub(t)
	raw, err := client.New(hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	// Strict field validation makes the apiserver reject fields the schema does not know instead
	// of pruning them silently: a schema gap shows up as a failure, not as lost data.
	c := client.WithFieldValidation(raw, metav1.FieldValidationStrict)
	ctx := context.Background()
	for _, ns := range []string{"policies", "rollout", "invalid"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("EveryPolicyCollectionFileAppliesUnchanged", func(t *testing.T) {
		dir := corpora.Dir(t, "policy-collection")
		files := policyCollectionFiles(t, dir)
		if len(files) < 10 {
			t.Fatalf("found %d policy-collection files under %s", len(files), dir)
		}
		for _, file := range files {
			for i, obj := range decodeAll(t, file) {
				obj.SetNamespace("policies")
				if err := c.Create(ctx, obj); err != nil {
					t.Errorf("%s #%d (%s %s): %v", file, i, obj.GetKind(), obj.GetName(), err)
					continue
				}
				got := &unstructured.Unstructured{}
				got.SetGroupVersionKind(obj.GroupVersionKind())
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got.Object["spec"], obj.Object["spec"]) {
					t.Errorf("%s: spec changed on the way through the apiserver:\nsent %v\ngot  %v", file, obj.Object["spec"], got.Object["spec"])
				}
			}
		}
	})

	t.Run("RolloutStrategyOfEachTypeRoundTrips", func(t *testing.T) {
		for name, strategy := range map[string]string{
			"all": `type: All
all:
  progressDeadline: 10m`,
			"progressive": `type: Progressive
progressive:
  minSuccessTime: 2m
  progressDeadline: 10m
  maxFailures: 20%
  maxConcurrency: 2
  mandatoryDecisionGroups:
  - groupName: canary`,
			"per-group": `type: ProgressivePerGroup
progressivePerGroup:
  minSuccessTime: 5m
  progressDeadline: None
  maxFailures: 1
  mandatoryDecisionGroups:
  - groupIndex: 0`,
		} {
			obj := policy(t, name, "spec:\n  rolloutStrategy:\n"+indent(strategy, "    "))
			obj.SetNamespace("rollout")
			if err := c.Create(ctx, obj); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(obj.GroupVersionKind())
			if err := c.Get(ctx, client.ObjectKeyFromObject(obj), got); err != nil {
				t.Fatal(err)
			}
			sent, _, _ := unstructured.NestedMap(obj.Object, "spec", "rolloutStrategy")
			back, _, _ := unstructured.NestedMap(got.Object, "spec", "rolloutStrategy")
			if !reflect.DeepEqual(sent, back) {
				t.Errorf("%s: rolloutStrategy changed:\nsent %v\ngot  %v", name, sent, back)
			}
		}
	})

	t.Run("PlacementBindingAndPolicySetApply", func(t *testing.T) {
		for _, doc := range []string{`apiVersion: policy.open-cluster-management.io/v1beta1
kind: PolicySet
metadata: {name: baseline, namespace: rollout}
spec:
  description: baseline for every cluster
  policies: [all, progressive]`, `apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: baseline, namespace: rollout}
placementRef: {apiGroup: cluster.open-cluster-management.io, kind: Placement, name: dev}
subjects:
- {apiGroup: policy.open-cluster-management.io, kind: PolicySet, name: baseline}
- {apiGroup: policy.open-cluster-management.io, kind: Policy, name: per-group}
bindingOverrides: {remediationAction: enforce}
subFilter: restricted`} {
			obj := &unstructured.Unstructured{}
			if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, obj); err != nil {
				t.Errorf("%s: %v", obj.GetKind(), err)
			}
		}
		bad := &unstructured.Unstructured{}
		_ = yaml.Unmarshal([]byte(`apiVersion: policy.open-cluster-management.io/v1
kind: PlacementBinding
metadata: {name: bad, namespace: rollout}
placementRef: {apiGroup: cluster.open-cluster-management.io, kind: Deployment, name: dev}
subjects: [{apiGroup: policy.open-cluster-management.io, kind: Policy, name: x}]`), &bad.Object)
		if err := c.Create(ctx, bad); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "placementRef.kind") {
			t.Errorf("PlacementBinding with a Deployment placementRef: %v, want Invalid naming placementRef.kind", err)
		}
	})

	t.Run("RootNameMustFitTheRootPolicyLabel", func(t *testing.T) { rootNameMustFitTheLabel(ctx, t, c) })
	t.Run("RootInAClusterNamespaceIsRefusedReplicasAndOtherNamespacesAreNot", func(t *testing.T) { rootRefusedInClusterNamespace(ctx, t, c) })
	t.Run("DependenciesAreAcceptedAndRefusedAsOnOCM", func(t *testing.T) { dependenciesAsOnOCM(ctx, t, c) })

	t.Run("InvalidPoliciesAreRejectedNamingTheField", func(t *testing.T) {
		for _, tc := range []struct{ name, spec, field string }{
			{"unknown-remediation", "spec:\n  remediationAction: fix", "spec.remediationAction"},
			{"unknown-rollout-type", "spec:\n  rolloutStrategy:\n    type: Sometimes", "spec.rolloutStrategy.type"},
			{"bad-max-failures", "spec:\n  rolloutStrategy:\n    type: Progressive\n    progressive:\n      maxFailures: lots", "spec.rolloutStrategy.progressive.maxFailures"},
			{"bad-dependency-compliance", "spec:\n  dependencies:\n  - apiVersion: policy.open-cluster-management.io/v1\n    kind: Policy\n    name: other\n    compliance: Mostly", "spec.dependencies[0].compliance"},
			{"bad-extra-dependency-compliance", "spec:\n  policy-templates:\n  - objectDefinition:\n      apiVersion: v1\n      kind: ConfigMap\n      metadata: {name: x}\n    extraDependencies:\n    - kind: Policy\n      name: other\n      compliance: Maybe", "spec.policy-templates[0].extraDependencies[0].compliance"},
			{"template-without-object-definition", "spec:\n  policy-templates:\n  - ignorePending: true", "spec.policy-templates[0].objectDefinition"},
			{"object-definition-without-kind", "spec:\n  policy-templates:\n  - objectDefinition:\n      apiVersion: v1\n      metadata: {name: x}", "spec.policy-templates[0].objectDefinition.kind"},
			{"per-group-fields-on-progressive", "spec:\n  rolloutStrategy:\n    type: Progressive\n    progressivePerGroup: {}", "progressivePerGroup is only valid with type ProgressivePerGroup"},
		} {
			obj := policy(t, tc.name, tc.spec)
			obj.SetNamespace("invalid")
			err := c.Create(ctx, obj)
			if !apierrors.IsInvalid(err) {
				t.Errorf("%s: create = %v, want Invalid", tc.name, err)
				continue
			}
			if !strings.Contains(err.Error(), tc.field) {
				t.Errorf("%s: error does not name %q: %v", tc.name, tc.field, err)
			}
		}
	})
}

// policy builds a minimal valid Policy and merges the YAML in spec over it.
func policy(t *testing.T, name, spec string) *unstructured.Unstructured {
	t.Helper()
	base := map[string]any{}
	if err := yaml.Unmarshal([]byte(`apiVersion: policy.open-cluster-management.io/v1
kind: Policy
spec:
  disabled: false
  remediationAction: enforce
  policy-templates:
  - objectDefinition:
      apiVersion: policy.open-cluster-management.io/v1
      kind: ConfigurationPolicy
      metadata: {name: cfg}
      spec: {remediationAction: inform}
`), &base); err != nil {
		t.Fatal(err)
	}
	override := map[string]any{}
	if err := yaml.Unmarshal([]byte(spec), &override); err != nil {
		t.Fatal(err)
	}
	for k, v := range override["spec"].(map[string]any) {
		base["spec"].(map[string]any)[k] = v
	}
	obj := &unstructured.Unstructured{Object: base}
	obj.SetName(name)
	return obj
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}

func policyCollectionFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && (strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml")) {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	return files
}

func decodeAll(t *testing.T, file string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := map[string]any{}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		if len(obj) > 0 {
			out = append(out, &unstructured.Unstructured{Object: obj})
		}
	}
}
