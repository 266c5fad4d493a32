// Package compliancemessage writes the one-line compliance message of a ConfigurationPolicy as
// OCM's config-policy-controller does for its events, custom messages included. The controller
// that evaluates the policy and template sync, which reports it to the hub, both say the same.
package compliancemessage

import (
	"context"
	"strings"
	gotemplate "text/template"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// readTimeout bounds a related object's read; one that does not come keeps its identity only.
const readTimeout = 30 * time.Second

// HasCustom says whether spec.customMessage has a template for p's current state.
func HasCustom(p *policyv1.ConfigurationPolicy) bool {
	return strings.TrimSpace(customText(p)) != ""
}

func customText(p *policyv1.ConfigurationPolicy) string {
	if p.Status.ComplianceState == policyv1.Compliant {
		return p.Spec.CustomMessage.Compliant
	}
	return p.Spec.CustomMessage.NonCompliant
}

// Of is OCM's one-line summary of a status, the message of compliance events:
// "NonCompliant; violation - <template message>; notification - <template message>".
func Of(st policyv1.ConfigurationPolicyStatus) string {
	parts := []string{string(st.ComplianceState)}
	for _, d := range st.CompliancyDetails {
		for _, c := range d.Conditions {
			parts = append(parts, c.Type+" - "+c.Message)
		}
	}
	return strings.Join(parts, "; ")
}

// Render is the compliance message of p's events: OCM's default one-line summary or, when
// spec.customMessage has a template for the current state, that template rendered over
// .DefaultMessage and .Policy (the policy as a map, each status.relatedObjects[].object the full
// object as the cache holds it). A template that fails keeps the default message and says why,
// so the compliance never goes unreported.
func Render(ctx context.Context, reader client.Reader, p *policyv1.ConfigurationPolicy) string {
	def := Of(p.Status)
	text := customText(p)
	if strings.TrimSpace(text) == "" {
		return def
	}
	tmpl, err := gotemplate.New("customMessage").Parse(text)
	if err != nil {
		return def + "; failure processing the custom message: failed to parse custom template: " + err.Error()
	}
	policy, err := runtime.DefaultUnstructuredConverter.ToUnstructured(p)
	if err != nil {
		return def + "; failure processing the custom message: " + err.Error()
	}
	withFullObjects(ctx, reader, policy)
	var out strings.Builder
	if err := tmpl.Execute(&out, map[string]any{"DefaultMessage": def, "Policy": policy}); err != nil {
		return def + "; failure processing the custom message: failed to execute custom template: " + err.Error()
	}
	return string(p.Status.ComplianceState) + "; " + out.String()
}

// withFullObjects replaces the identity of each related object that exists with the object
// itself, read from the cache the policy's watches keep, so templates can reach any field.
func withFullObjects(ctx context.Context, reader client.Reader, policy map[string]any) {
	related, _, _ := unstructured.NestedSlice(policy, "status", "relatedObjects")
	for i, rel := range related {
		relMap, ok := rel.(map[string]any)
		if !ok {
			continue
		}
		id, _ := relMap["object"].(map[string]any)
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": id["apiVersion"], "kind": id["kind"]}}
		name, _, _ := unstructured.NestedString(id, "metadata", "name")
		namespace, _, _ := unstructured.NestedString(id, "metadata", "namespace")
		if name == "" || name == "-" {
			continue
		}
		readCtx, cancel := context.WithTimeout(ctx, readTimeout)
		err := reader.Get(readCtx, client.ObjectKey{Namespace: namespace, Name: name}, obj)
		cancel()
		if err == nil {
			relMap["object"] = obj.Object
			related[i] = relMap
		}
	}
	if related != nil {
		_ = unstructured.SetNestedSlice(policy, related, "status", "relatedObjects")
	}
}
