package policyserver

import (
	"encoding/json"
	"testing"
)

func TestRequestUID_FastPathAndAnyFieldOrder(t *testing.T) {
	for _, req := range []string{
		`{"uid":"a1","kind":{"kind":"Pod"},"object":{"metadata":{"uid":"not-this"}}}`,
		`{"kind":{"kind":"Pod"},"object":{"metadata":{"uid":"not-this"}},"uid":"a1"}`,
		` { "uid" : "a1" , "kind":{"kind":"Pod"}}`,
		`{"u\u0069d":"a\u0031"}`,
	} {
		uid, err := requestUID(json.RawMessage(req))
		if err != nil || uid != "a1" {
			t.Errorf("%s: got %q, %v", req, uid, err)
		}
	}
	if _, err := requestUID(json.RawMessage(`{"kind":`)); err == nil {
		t.Error("a truncated request must be an error")
	}
}
