package admissionpolicy

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"regent.dev/regent/api/crds"
	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// The CRDs serve v1alpha2 with `conversion: None`, which is only lossless when both versions
// have the same schema.
func TestCRDs_V1alpha2HasV1sSchema(t *testing.T) {
	all, err := crds.Regent()
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range all {
		if crd.Spec.Group != kubewardenv1.GroupVersion.Group || len(crd.Spec.Versions) < 2 {
			continue
		}
		byName := map[string]apiextensionsv1.CustomResourceDefinitionVersion{}
		for _, v := range crd.Spec.Versions {
			byName[v.Name] = v
		}
		v1, alpha := byName["v1"], byName["v1alpha2"]
		if !v1.Storage || alpha.Storage || !alpha.Served || !alpha.Deprecated {
			t.Errorf("%s: want v1 stored and v1alpha2 served, deprecated", crd.Name)
		}
		if crd.Spec.Conversion != nil && crd.Spec.Conversion.Strategy != apiextensionsv1.NoneConverter {
			t.Errorf("%s: conversion %s, want None", crd.Name, crd.Spec.Conversion.Strategy)
		}
		a, b := v1.Schema.OpenAPIV3Schema.DeepCopy(), alpha.Schema.OpenAPIV3Schema.DeepCopy()
		a.Description, b.Description = "", "" // only the kind's description names its version
		if !equality.Semantic.DeepEqual(a, b) || !equality.Semantic.DeepEqual(v1.AdditionalPrinterColumns, alpha.AdditionalPrinterColumns) {
			t.Errorf("%s: v1alpha2's schema or columns differ from v1's", crd.Name)
		}
	}
}

// TestV1alpha2 applies a Kubewarden v1alpha2 manifest unchanged, then plays a cluster that ran
// Kubewarden when v1alpha2 was the stored version: Regent's CRDs must apply over it (the
// apiserver refuses a CRD that drops a version in status.storedVersions) and its policies must
// read back whole in v1.
func TestV1alpha2(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()
	kubectlBin, err := fleet.Binary(fleet.DefaultBinDir(), "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) (string, error) {
		out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig", hub.Kubeconfig}, args...)...).CombinedOutput()
		return string(out), err
	}

	out, err := kubectl("apply", "--server-side", "-f", "testdata/kubewarden-v1alpha2.yaml")
	if err != nil {
		t.Fatalf("apply a v1alpha2 policy: %v\n%s", err, out)
	}
	if !strings.Contains(out, "deprecated") {
		t.Errorf("want Kubewarden's deprecation warning, got %s", out)
	}
	p := &kubewardenv1.ClusterAdmissionPolicy{}
	if err := c.Get(ctx, client.ObjectKey{Name: "kw-v1alpha2"}, p); err != nil {
		t.Fatal(err)
	}
	if p.Spec.Mode != kubewardenv1.ModeMonitor || p.Spec.NamespaceSelector.MatchLabels["policies"] != "enforced" || len(p.Spec.Rules) != 1 {
		t.Errorf("read in v1: %+v", p.Spec)
	}

	// A Kubewarden install from the days v1alpha2 was stored: its CRD stored v1alpha2, then v1.
	const crdName = "clusteradmissionpolicies.policies.kubewarden.io"
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: crdName}, crd); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, crd); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the CRD is gone", func() bool {
		return c.Get(ctx, client.ObjectKey{Name: crdName}, &apiextensionsv1.CustomResourceDefinition{}) != nil
	})
	open := &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: ptrTo(true)}}
	old := &apiextensionsv1.CustomResourceDefinition{ObjectMeta: metav1.ObjectMeta{Name: crdName},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{Group: "policies.kubewarden.io", Scope: apiextensionsv1.ClusterScoped,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "clusteradmissionpolicies", Singular: "clusteradmissionpolicy",
				Kind: "ClusterAdmissionPolicy", ListKind: "ClusterAdmissionPolicyList", ShortNames: []string{"cap"}},
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1alpha2", Served: true, Storage: true, Schema: open}}}}
	if err := c.Create(ctx, old); err != nil {
		t.Fatal(err)
	}
	legacy := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(mustRead(t, "testdata/kubewarden-v1alpha2.yaml"), &legacy.Object); err != nil {
		t.Fatal(err)
	}
	legacy.SetName("stored-as-v1alpha2")
	eventually(t, "a policy stored as v1alpha2", func() bool { return c.Create(ctx, legacy.DeepCopy()) == nil })
	eventually(t, "v1 becomes the stored version", func() bool {
		if err := c.Get(ctx, client.ObjectKey{Name: crdName}, old); err != nil {
			return false
		}
		old.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{
			{Name: "v1", Served: true, Storage: true, Schema: open},
			{Name: "v1alpha2", Served: true, Schema: open},
		}
		return c.Update(ctx, old) == nil
	})
	if !strings.Contains(strings.Join(old.Status.StoredVersions, ","), "v1alpha2") {
		t.Fatalf("stored versions %v, want v1alpha2 among them", old.Status.StoredVersions)
	}

	// Evidence for serving v1alpha2: without it, the apiserver refuses Regent's CRD here.
	path := "../../api/crds/policies.kubewarden.io_clusteradmissionpolicies.yaml"
	var regent apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(mustRead(t, path), &regent); err != nil {
		t.Fatal(err)
	}
	v1Only := regent.DeepCopy()
	v1Only.Spec.Versions = v1Only.Spec.Versions[:1]
	v1OnlyFile := t.TempDir() + "/v1only.yaml"
	if b, err := yaml.Marshal(v1Only); err != nil || os.WriteFile(v1OnlyFile, b, 0o600) != nil {
		t.Fatal(err)
	}
	if out, err := kubectl("apply", "--server-side", "--force-conflicts", "--dry-run=server", "-f", v1OnlyFile); err == nil || !strings.Contains(out, "storedVersions") {
		t.Errorf("a v1-only CRD over a cluster that stored v1alpha2: got %v\n%s\nwant a refusal naming storedVersions", err, out)
	}
	if out, err := kubectl("apply", "--server-side", "--force-conflicts", "-f", path); err != nil {
		t.Fatalf("Regent's CRD over a Kubewarden install: %v\n%s", err, out)
	}
	got := &unstructured.Unstructured{}
	got.SetGroupVersionKind(schema.GroupVersionKind{Group: "policies.kubewarden.io", Version: "v1", Kind: "ClusterAdmissionPolicy"})
	eventually(t, "the legacy policy read in v1", func() bool { return c.Get(ctx, client.ObjectKey{Name: "stored-as-v1alpha2"}, got) == nil })
	want, _ := json.Marshal(legacy.Object["spec"])
	have, _ := json.Marshal(got.Object["spec"])
	var wantSpec, haveSpec map[string]any
	_ = json.Unmarshal(want, &wantSpec)
	_ = json.Unmarshal(have, &haveSpec)
	for _, d := range missing("spec", wantSpec, haveSpec) {
		t.Errorf("lost: %s", d)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
