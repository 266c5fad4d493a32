package configpolicy

import (
	"context"
	"os"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
)

// TestManagedClusterTemplates resolves "{{ }}" templates against a real apiserver: each function
// family, object-templates-raw, the watches on what a template read, and failures in status.
func TestManagedClusterTemplates(t *testing.T) {
	hub := fleettest.Hub(t)
	c, _ := startController(t, hub.Config, Options{})
	crd, err := os.ReadFile("testdata/templates/clusterclaim-crd.yaml")
	if err != nil {
		t.Fatal(err)
	}
	apply(t, c, string(crd))
	// The CRD is served some time after it is created.
	claim := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cluster.open-cluster-management.io/v1alpha1",
		"kind": "ClusterClaim", "metadata": map[string]any{"name": "id.k8s.io"}, "spec": map[string]any{"value": "cluster-one"}}}
	eventually(t, "the ClusterClaim CRD is served", func() bool { return c.Create(context.Background(), claim) == nil })

	dataOf := func(ns, name string) map[string]any {
		obj, found := getObject(t, c, "v1", "ConfigMap", ns, name)
		if !found {
			return nil
		}
		data, _, _ := unstructured.NestedMap(obj.Object, "data")
		return data
	}

	t.Run("FromSecretFromConfigMapClusterClaim_FollowTheirSources", func(t *testing.T) {
		namespace(t, c, "tpl-from", nil)
		apply(t, c, `apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: tpl-from}
stringData: {password: s3cret}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: tpl-from}
data: {replicas: "3", debug: "true", mode: strict}
`)
		apply(t, c, policyYAML("tpl-from", "from", "enforce", `
object-templates:
- complianceType: musthave
  objectDefinition:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: out, namespace: tpl-from}
    data:
      password: '{{ fromSecret "tpl-from" "creds" "password" | base64dec }}'
      encoded: '{{ fromSecret "tpl-from" "creds" "password" }}'
      mode: '{{ fromConfigMap "tpl-from" "settings" "mode" | upper }}'
      cluster: '{{ fromClusterClaim "id.k8s.io" }}'
      missing: '{{ fromConfigMap "tpl-from" "settings" "nokey" | default "fallback" }}'
- complianceType: musthave
  objectDefinition:
    apiVersion: v1
    kind: Secret
    metadata: {name: copy, namespace: tpl-from}
    data: '{{ copySecretData "tpl-from" "creds" }}'`))
		state(t, c, "tpl-from", "from", policyv1.Compliant)
		data := dataOf("tpl-from", "out")
		want := map[string]any{"password": "s3cret", "encoded": "czNjcmV0", "mode": "STRICT", "cluster": "cluster-one", "missing": "fallback"}
		for k, v := range want {
			if data[k] != v {
				t.Errorf("data[%s] = %v, want %v (data %v)", k, data[k], v, data)
			}
		}
		if copied, found := getObject(t, c, "v1", "Secret", "tpl-from", "copy"); !found {
			t.Error("copySecretData: Secret not created")
		} else if pw, _, _ := unstructured.NestedString(copied.Object, "data", "password"); pw != "czNjcmV0" {
			t.Errorf("copySecretData: data.password = %q", pw)
		}
		// The policy watches what its templates read: a new source value reaches the object.
		apply(t, c, configMap("tpl-from", "settings", `{replicas: "3", debug: "true", mode: lax}`))
		eventually(t, "the new ConfigMap value is applied", func() bool { return dataOf("tpl-from", "out")["mode"] == "LAX" })
		apply(t, c, `apiVersion: cluster.open-cluster-management.io/v1alpha1
kind: ClusterClaim
metadata: {name: id.k8s.io}
spec: {value: cluster-two}`)
		eventually(t, "the new ClusterClaim value is applied", func() bool { return dataOf("tpl-from", "out")["cluster"] == "cluster-two" })
	})

	t.Run("TypedValuesAndAutoindent", func(t *testing.T) {
		namespace(t, c, "tpl-typed", nil)
		apply(t, c, configMap("tpl-typed", "settings", `{replicas: "2", paused: "true", script: "line one\nline two\n"}`))
		apply(t, c, policyYAML("tpl-typed", "typed", "enforce", `
object-templates:
- complianceType: musthave
  objectDefinition:
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: web, namespace: tpl-typed}
    spec:
      replicas: '{{ fromConfigMap "tpl-typed" "settings" "replicas" | toInt }}'
      paused: '{{ fromConfigMap "tpl-typed" "settings" "paused" | toBool }}'
      selector: {matchLabels: {app: web}}
      template:
        metadata: {labels: {app: web}}
        spec: {containers: [{name: web, image: nginx}]}
- complianceType: musthave
  objectDefinition:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: script, namespace: tpl-typed}
    data:
      script: |
        {{ fromConfigMap "tpl-typed" "settings" "script" | autoindent }}
- complianceType: musthave
  objectDefinition:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: literal, namespace: tpl-typed}
    data: '{{ "{\"a\": \"b\"}" | toLiteral }}'`))
		state(t, c, "tpl-typed", "typed", policyv1.Compliant)
		dep, found := getObject(t, c, "apps/v1", "Deployment", "tpl-typed", "web")
		if !found {
			t.Fatal("Deployment not created")
		}
		if n, _, _ := unstructured.NestedInt64(dep.Object, "spec", "replicas"); n != 2 {
			t.Errorf("toInt: replicas = %d", n)
		}
		if p, _, _ := unstructured.NestedBool(dep.Object, "spec", "paused"); !p {
			t.Error("toBool: paused is not true")
		}
		if dataOf("tpl-typed", "literal")["a"] != "b" {
			t.Errorf("toLiteral: data = %v", dataOf("tpl-typed", "literal"))
		}
		if got := dataOf("tpl-typed", "script")["script"]; got != "line one\nline two\n" {
			t.Errorf("autoindent: script = %q", got)
		}
	})

	t.Run("ObjectTemplatesRaw_RangeOverLookup", func(t *testing.T) {
		namespace(t, c, "tpl-raw", map[string]string{"team": "a"})
		apply(t, c, `apiVersion: v1
kind: ConfigMap
metadata: {name: one, namespace: tpl-raw, labels: {mirror: "yes"}}
data: {v: "1"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: two, namespace: tpl-raw, labels: {mirror: "yes"}}
data: {v: "2"}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: other, namespace: tpl-raw}
data: {v: "x"}`)
		apply(t, c, policyYAML("tpl-raw", "raw", "enforce", `
object-templates-raw: |
  {{- $team := (lookup "v1" "Namespace" "" "tpl-raw").metadata.labels.team }}
  {{- range (lookup "v1" "ConfigMap" "tpl-raw" "" "mirror=yes").items }}
  - complianceType: musthave
    objectDefinition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: mirror-{{ .metadata.name }}
        namespace: tpl-raw
      data:
        team: {{ $team }}
        v: "{{ .data.v }}"
  {{- end }}`))
		state(t, c, "tpl-raw", "raw", policyv1.Compliant)
		if d := dataOf("tpl-raw", "mirror-one"); d["v"] != "1" || d["team"] != "a" {
			t.Errorf("mirror-one data = %v", d)
		}
		if d := dataOf("tpl-raw", "mirror-two"); d["v"] != "2" {
			t.Errorf("mirror-two data = %v", d)
		}
		if _, found := getObject(t, c, "v1", "ConfigMap", "tpl-raw", "mirror-other"); found {
			t.Error("the label selector of lookup was ignored")
		}
		// A new object matching the lookup is a new iteration of the range.
		apply(t, c, `apiVersion: v1
kind: ConfigMap
metadata: {name: three, namespace: tpl-raw, labels: {mirror: "yes"}}
data: {v: "3"}`)
		eventually(t, "the range covers the new ConfigMap", func() bool { return dataOf("tpl-raw", "mirror-three")["v"] == "3" })
	})

	t.Run("Failures_NonCompliantNothingApplied", func(t *testing.T) {
		namespace(t, c, "tpl-fail", nil)
		cases := []struct{ name, def, message string }{
			{"missing-secret", `data: {v: '{{ fromSecret "tpl-fail" "absent" "k" }}'}`, `failed to get the secret absent from tpl-fail`},
			{"parse-error", `data: {v: '{{ fromSecret "tpl-fail" }'}`, "failed to parse the template"},
			{"unknown-function", `data: {v: '{{ nosuchfunction "x" }}'}`, `function "nosuchfunction" not defined`},
			{"missing-map-key", `data: {v: '{{ (lookup "v1" "Namespace" "" "tpl-fail").metadata.nokey }}'}`, `map has no entry for key "nokey"`},
			{"unknown-kind", `data: {v: '{{ (lookup "example.com/v1" "Nothing" "" "x").spec }}'}`, "is not served by the cluster"},
		}
		for _, tc := range cases {
			apply(t, c, policyYAML("tpl-fail", tc.name, "enforce", `
object-templates:
- complianceType: musthave
  objectDefinition:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: `+tc.name+`, namespace: tpl-fail}
    `+tc.def))
		}
		for _, tc := range cases {
			state(t, c, "tpl-fail", tc.name, policyv1.NonCompliant, tc.message)
			if _, found := getObject(t, c, "v1", "ConfigMap", "tpl-fail", tc.name); found {
				t.Errorf("%s: the object was applied although its template failed", tc.name)
			}
		}
		// The Secret appearing resolves the policy through the watch on Secrets.
		apply(t, c, `apiVersion: v1
kind: Secret
metadata: {name: absent, namespace: tpl-fail}
stringData: {k: found}`)
		state(t, c, "tpl-fail", "missing-secret", policyv1.Compliant)
		if d := dataOf("tpl-fail", "missing-secret"); d["v"] != "Zm91bmQ=" {
			t.Errorf("data = %v", d)
		}
	})

	t.Run("DisableTemplatesAnnotation_LeavesTextAsIs", func(t *testing.T) {
		namespace(t, c, "tpl-off", nil)
		doc := policyYAML("tpl-off", "disabled", "enforce", `
object-templates:
- complianceType: musthave
  objectDefinition:
    apiVersion: v1
    kind: ConfigMap
    metadata: {name: literal, namespace: tpl-off}
    data: {v: '{{ not a template }}'}`)
		doc = strings.Replace(doc, "metadata: {name: disabled, namespace: tpl-off}",
			"metadata: {name: disabled, namespace: tpl-off, annotations: {policy.open-cluster-management.io/disable-templates: \"true\"}}", 1)
		apply(t, c, doc)
		state(t, c, "tpl-off", "disabled", policyv1.Compliant)
		if d := dataOf("tpl-off", "literal"); d["v"] != "{{ not a template }}" {
			t.Errorf("data = %v", d)
		}
	})
}
