package templatesync

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/spoke-addon/compliancemessage"
)

// aggregate folds template compliance into the policy's with OCM's precedence:
// NonCompliant > Pending > unknown > Compliant. No templates: unknown.
func aggregate(states []policyv1.ComplianceState) policyv1.ComplianceState {
	if len(states) == 0 {
		return ""
	}
	rank := func(s policyv1.ComplianceState) int {
		switch s {
		case policyv1.NonCompliant:
			return 3
		case policyv1.Pending:
			return 2
		case "":
			return 1
		}
		return 0
	}
	worst := policyv1.Compliant
	for _, s := range states {
		if rank(s) > rank(worst) {
			worst = s
		}
	}
	return worst
}

// evaluatedCurrent says whether a template's status answers its current spec: its controller
// records the generation it evaluated (lastEvaluatedGeneration, or observedGeneration); a kind that
// records neither is taken at its word once it reports a compliance.
func evaluatedCurrent(obj *unstructured.Unstructured) bool {
	if obj.GroupVersionKind().Group == KubewardenGroup {
		// An admission policy has answered for its spec once its newest generation serves, or
		// failed to.
		serving, _, _ := unstructured.NestedInt64(obj.Object, "status", "servingGeneration")
		phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
		return serving == obj.GetGeneration() || phase == "Failed"
	}
	for _, field := range []string{"lastEvaluatedGeneration", "observedGeneration"} {
		if g, ok, _ := unstructured.NestedInt64(obj.Object, "status", field); ok {
			return g == obj.GetGeneration()
		}
	}
	_, ok := complianceOf(obj)
	return ok
}

// customMessage is, for a ConfigurationPolicy whose spec.customMessage has a template for its
// state, the message its compliance events carry: OCM's hub history shows what those events
// say, so the hub reads the user's message, not the default summary.
func customMessage(ctx context.Context, reader client.Reader, obj *unstructured.Unstructured) (string, bool) {
	if obj.GroupVersionKind() != policyv1.GroupVersion.WithKind("ConfigurationPolicy") {
		return "", false
	}
	p := &policyv1.ConfigurationPolicy{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, p); err != nil || !compliancemessage.HasCustom(p) {
		return "", false
	}
	return compliancemessage.Render(ctx, reader, p), true
}

// statusMessage summarises what a template's controller said about it.
func statusMessage(obj *unstructured.Unstructured, state policyv1.ComplianceState) string {
	if obj.GroupVersionKind().Group == KubewardenGroup {
		return admissionPolicyMessage(obj, state)
	}
	var msgs []string
	details, _, _ := unstructured.NestedSlice(obj.Object, "status", "compliancyDetails")
	for _, d := range details {
		conds, _, _ := unstructured.NestedSlice(asMap(d), "conditions")
		for _, c := range conds {
			if m, _, _ := unstructured.NestedString(asMap(c), "message"); m != "" {
				msgs = append(msgs, m)
			}
		}
	}
	if m, _, _ := unstructured.NestedString(obj.Object, "status", "message"); m != "" && len(msgs) == 0 {
		msgs = append(msgs, m)
	}
	if len(msgs) == 0 {
		if state == "" {
			return fmt.Sprintf("%s %s has not reported a compliance yet", obj.GetKind(), obj.GetName())
		}
		return fmt.Sprintf("%s %s is %s", obj.GetKind(), obj.GetName(), state)
	}
	return string(state) + "; " + strings.Join(msgs, "; ")
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// admissionPolicyMessage says, for the hub's view, which generation an admission policy serves
// and how each policy-server replica is doing with the newest one.
func admissionPolicyMessage(obj *unstructured.Unstructured, state policyv1.ComplianceState) string {
	phase, _, _ := unstructured.NestedString(obj.Object, "status", "phase")
	serving, _, _ := unstructured.NestedInt64(obj.Object, "status", "servingGeneration")
	parts := []string{fmt.Sprintf("%s %s is %s, serving generation %d of %d", obj.GetKind(), obj.GetName(), orUnknown(phase), serving, obj.GetGeneration())}
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m := asMap(c)
		typ, _, _ := unstructured.NestedString(m, "type")
		status, _, _ := unstructured.NestedString(m, "status")
		reason, _, _ := unstructured.NestedString(m, "reason")
		msg, _, _ := unstructured.NestedString(m, "message")
		line := fmt.Sprintf("%s=%s", typ, status)
		if status != "True" && (reason != "" || msg != "") {
			line += fmt.Sprintf(" (%s: %s)", reason, msg)
		}
		parts = append(parts, line)
	}
	// Each policy-server replica's report on the newest generation (status.replicas).
	replicas, _, _ := unstructured.NestedSlice(obj.Object, "status", "replicas")
	for _, r := range replicas {
		m := asMap(r)
		n, _, _ := unstructured.NestedInt64(m, "replica")
		ready, _, _ := unstructured.NestedString(m, "ready")
		reason, _, _ := unstructured.NestedString(m, "reason")
		msg, _, _ := unstructured.NestedString(m, "message")
		line := fmt.Sprintf("Ready on replica %d=%s", n, ready)
		if ready != "True" && (reason != "" || msg != "") {
			line += fmt.Sprintf(" (%s: %s)", reason, msg)
		}
		parts = append(parts, line)
	}
	if state != "" {
		return string(state) + "; " + strings.Join(parts, "; ")
	}
	return strings.Join(parts, "; ")
}

func orUnknown(s string) string {
	if s == "" {
		return "not yet reported"
	}
	return s
}
