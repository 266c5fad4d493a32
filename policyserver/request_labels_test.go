package policyserver

import (
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// FuzzRequestLabels checks the byte scanner against a full decode: for any request that decodes
// as an AdmissionRequest, the labels are the decoded fields, whatever the key order.
func FuzzRequestLabels(f *testing.F) {
	f.Add([]byte(`{"uid":"u","kind":{"kind":"Pod"},"requestKind":{"kind":"Pod"},"namespace":"n","operation":"CREATE","object":{"a":"}{\"]"}}`))
	f.Add([]byte(`{"object":{"x":[1,{"y":"\\"}]},"operation":"UPDATE","namespace":"n\u0041","kind":{"kind":"Deployment"}}`))
	f.Add([]byte(` { "operation" : "DELETE" , "kind" : { "kind" : "ClusterRole" } } `))
	f.Fuzz(func(t *testing.T, request []byte) {
		var want admissionv1.AdmissionRequest
		if json.Unmarshal(request, &want) != nil {
			requestLabels(request) // must not panic on anything
			return
		}
		kind, namespace, operation := requestLabels(request)
		wantKind := want.Kind.Kind
		if want.RequestKind != nil && want.RequestKind.Kind != "" {
			wantKind = want.RequestKind.Kind
		}
		if kind != wantKind || namespace != want.Namespace || operation != string(want.Operation) {
			t.Errorf("requestLabels(%s) = (%q, %q, %q), want (%q, %q, %q)", request, kind, namespace, operation, wantKind, want.Namespace, want.Operation)
		}
	})
}

// BenchmarkRequestLabels: kube-apiserver's field order (the scan stops before the objects) and
// keys in sorted order, as a map-built review has (object before operation: a walk over it).
func BenchmarkRequestLabels(b *testing.B) {
	obj := runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"web","namespace":"default","labels":{"team":"a","owner":"me"}},"spec":{"containers":[{"name":"web","image":"nginx:1.27","securityContext":{"privileged":false}},{"name":"proxy","image":"envoy:1.30"}]}}`)}
	req := admissionv1.AdmissionRequest{UID: "u", Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
		RequestKind: &metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Namespace: "default",
		Operation: admissionv1.Create, Object: obj, OldObject: obj}
	apiserver, _ := json.Marshal(req)
	var m map[string]any
	_ = json.Unmarshal(apiserver, &m)
	sorted, _ := json.Marshal(m)
	for name, request := range map[string][]byte{"apiserver-order": apiserver, "sorted-keys": sorted} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if kind, _, _ := requestLabels(request); kind != "Pod" {
					b.Fatal(kind)
				}
			}
		})
	}
}
