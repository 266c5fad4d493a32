package v1alpha1

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestResourceReportSpec_OmitsEmptySourceAndZeroTimestampAndRoundTrips(t *testing.T) {
	spec := ResourceReportSpec{Results: []openreportsv1alpha1.ReportResult{
		{Policy: "a", Result: "fail", Description: "missing label", Properties: map[string]string{PolicyScopeProperty: "namespaced"}},
		{Policy: "b", Result: "pass", Source: "kubewarden", Timestamp: metav1.Timestamp{Seconds: 7},
			Subjects: []corev1.ObjectReference{{Kind: "Pod", Name: "p"}}},
	}}
	raw, err := json.Marshal(ResourceReport{Spec: spec})
	if err != nil {
		t.Fatal(err)
	}
	first := string(raw)[strings.Index(string(raw), `"results"`):strings.Index(string(raw), `"policy":"b"`)]
	if strings.Contains(first, `"source"`) || strings.Contains(first, `"timestamp"`) {
		t.Errorf("empty source or zero timestamp written: %s", raw)
	}
	if !strings.Contains(string(raw), `"source":"kubewarden"`) || !strings.Contains(string(raw), `"timestamp":{"seconds":7,"nanos":0}`) {
		t.Errorf("a set source or timestamp was lost: %s", raw)
	}
	var back ResourceReport
	if err := json.Unmarshal(raw, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Spec, spec) {
		t.Errorf("round trip:\n got %+v\nwant %+v", back.Spec, spec)
	}
	if raw, _ := json.Marshal(ResourceReportSpec{}); string(raw) != `{}` {
		t.Errorf("empty spec is %s, want {}", raw)
	}
}
