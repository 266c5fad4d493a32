package background

import (
	"encoding/json"
	"fmt"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
)

// ResultSource is the source of every result the scan writes: the same as the admission
// producer's (reports/admission), since both write results of the same policies into the same
// reports, and a policy that no longer exists loses the results of either. Producers of other
// kinds of policy (ConfigurationPolicy) must use another.
const ResultSource = "regent"

// auditRequest is the AdmissionRequest the scan evaluates obj with: its creation, as a dry run,
// as Kubewarden's audit scanner sends it. The request's uid is derived from the object's, so
// the same object gives the same request.
func auditRequest(t resourceType, obj *unstructured.Unstructured) ([]byte, error) {
	raw, err := obj.MarshalJSON()
	if err != nil {
		return nil, fmt.Errorf("encode %s %s/%s: %w", t.kind, obj.GetNamespace(), obj.GetName(), err)
	}
	gvk := metav1.GroupVersionKind{Group: t.gvr.Group, Version: t.gvr.Version, Kind: t.kind}
	gvr := metav1.GroupVersionResource{Group: t.gvr.Group, Version: t.gvr.Version, Resource: t.gvr.Resource}
	dry := true
	req := admissionv1.AdmissionRequest{
		UID:  types.UID("background-" + string(obj.GetUID())),
		Kind: gvk, Resource: gvr, RequestKind: &gvk, RequestResource: &gvr,
		Name: obj.GetName(), Namespace: obj.GetNamespace(), Operation: admissionv1.Create,
		Object: runtime.RawExtension{Raw: raw}, DryRun: &dry,
	}
	return json.Marshal(req)
}

// resultOf turns an audit answer into the policy's one result: pass when admitted, fail with the
// policy's message when rejected, error when the evaluation failed. No timestamp: an unchanged
// answer must give an unchanged report, which is then not written.
func resultOf(policyName string, resp *admissionv1.AdmissionResponse, outcome string) openreportsv1alpha1.ReportResult {
	r := openreportsv1alpha1.ReportResult{Source: ResultSource, Rule: policyName, Scored: true, Result: "pass"}
	if resp.Result != nil {
		r.Description = resp.Result.Message
	}
	switch {
	case outcome == "error":
		r.Result = "error"
	case !resp.Allowed:
		r.Result = "fail"
	}
	return r
}
