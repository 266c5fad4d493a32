package lifecycle

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/reports"
)

// The server serves "namespaced-shop-p", but reports name the AdmissionPolicy "p" of its
// namespace, as the aggregator's pol-<name> Reports and the background scan do.
func TestRevision_AnswersAreReportedUnderThePolicysOwnNameAndScope(t *testing.T) {
	data, _ := json.Marshal(kubewardenv1.PolicySpec{Module: "x.rego", ReportAdmission: true})
	for kind, want := range map[string]reports.PolicyRef{
		kubewardenv1.KindClusterAdmissionPolicy: {Scope: reportsv1alpha1.PolicyScopeCluster, Name: "p"},
		kubewardenv1.KindAdmissionPolicy:        {Scope: reportsv1alpha1.PolicyScopeNamespaced, Name: "p"},
	} {
		rev, err := decodeRevision(&kubewardenv1.PolicyRevision{Spec: kubewardenv1.PolicyRevisionSpec{
			ObjectReference: kubewardenv1.PolicyReference{Kind: kind, Name: "p", Namespace: "shop"}, PolicyGeneration: 4,
			Data: runtime.RawExtension{Raw: data}}})
		if err != nil {
			t.Fatal(err)
		}
		pc := rev.policyConfig("x.wasm", "", "")
		if pc.ReportAs == nil || *pc.ReportAs != want {
			t.Errorf("%s (served as %s): reported as %+v, want %+v", kind, rev.key.Name, pc.ReportAs, want)
		}
		if !pc.ReportAdmission {
			t.Errorf("%s: reportAdmission did not reach the server", kind)
		}
	}
}
