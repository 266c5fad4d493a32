package configpolicy

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/util/json"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// FuzzCompareObject feeds an object template and a cluster object through what the controller
// runs on them (template decoding, compareObject, the object enforce would write) and checks the
// promises the controller relies on:
//   - an object always complies with itself, as musthave and as mustonlyhave;
//   - compliance means no write: the desired object is the existing one;
//   - enforcing converges: the desired object complies with the template it was made from (a
//     status the template names is never written, so templates naming status are skipped);
//   - comparing changes neither input, and the desired object encodes as JSON for the write.
func FuzzCompareObject(f *testing.F) {
	for _, seed := range []struct {
		template, existing string
		ctype, mctype      uint8
	}{
		{`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default","labels":{"team":"a"}},"data":{"k":"v"}}`,
			`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c","namespace":"default","uid":"1","labels":{"team":"b","x":"y"}},"data":{"k":"w","o":"p"}}`, 0, 0},
		{`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"a","image":"nginx","resources":{"limits":{"memory":"1Gi"}}}]}}`,
			`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"b","image":"x"},{"name":"a","image":"nginx","resources":{"limits":{"memory":"1024Mi"}}}]},"status":{"phase":"Running"}}`, 1, 0},
		{`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s","annotations":{"a":""}},"spec":{"ports":[{"port":"80"},{"port":443}]}}`,
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"s"},"spec":{"ports":[{"port":443,"protocol":"TCP"},{"port":80}]}}`, 1, 1},
		{`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"n"},"spec":{"finalizers":[null,""]},"status":{"phase":"Active"}}`,
			`{"apiVersion":"v1","kind":"Namespace","metadata":"x","spec":{"finalizers":["",null]}}`, 2, 1},
		{`{"apiVersion":"v1","kind":"ConfigMap","data":{"a":[{"x":1},{"x":"1.0"}]}}`, `{"data":{"a":[{"x":"1"}]}}`, 0, 0},
	} {
		f.Add([]byte(seed.template), []byte(seed.existing), seed.ctype, seed.mctype)
	}
	types := []policyv1.ComplianceType{policyv1.MustHave, policyv1.MustOnlyHave, policyv1.MustNotHave, "MustOnlyHave"}
	meta := []policyv1.MetadataComplianceType{"", "musthave", "mustonlyhave", "MustHave"}
	f.Fuzz(func(t *testing.T, templateJSON, existingJSON []byte, ctype, mctype uint8) {
		tmpl, err := (&evaluator{}).template(&policyv1.ObjectTemplate{
			ComplianceType:         types[int(ctype)%len(types)],
			MetadataComplianceType: meta[int(mctype)%len(meta)],
			ObjectDefinition:       runtime.RawExtension{Raw: templateJSON},
		})
		if err != nil {
			return // refusing a template is fine; panicking on it is not
		}

		// The object as it would be created from this template, decoded the way a client
		// decodes what the apiserver returns (integers as int64).
		var self map[string]any
		if err := kjson.Unmarshal(templateJSON, &self); err != nil {
			t.Fatalf("the template decoded but the same bytes do not decode as an object: %v", err)
		}
		for _, onlyHave := range []bool{false, true} {
			if ok, desired := compareObject(tmpl.object, self, onlyHave, onlyHave); !ok {
				t.Fatalf("an object does not comply with itself (onlyHave %v): template %s, desired %v", onlyHave, templateJSON, desired)
			}
		}

		var existing map[string]any
		if err := kjson.Unmarshal(existingJSON, &existing); err != nil || existing == nil {
			return
		}
		templateBefore, existingBefore := deepCopy(tmpl.object), deepCopy(existing)
		ok, desired := compareObject(tmpl.object, existing, tmpl.onlyHave, tmpl.metadataOnly)
		if !reflect.DeepEqual(tmpl.object, templateBefore) || !reflect.DeepEqual(existing, existingBefore) {
			t.Fatalf("compareObject changed its inputs")
		}
		if ok && !reflect.DeepEqual(desired, existing) {
			t.Fatalf("compliant, yet the desired object differs from the existing one: %v vs %v", desired, existing)
		}
		if _, err := json.Marshal(desired); err != nil {
			t.Fatalf("the desired object does not encode: %v", err)
		}
		if _, namesStatus := tmpl.object["status"]; namesStatus {
			return
		}
		if ok2, again := compareObject(tmpl.object, desired, tmpl.onlyHave, tmpl.metadataOnly); !ok2 {
			t.Fatalf("enforcing does not converge: the object written for template %s over %s is %v, which still does not comply (next write %v)",
				templateJSON, existingJSON, desired, again)
		}
	})
}
