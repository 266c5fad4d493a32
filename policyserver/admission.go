package policyserver

import (
	"encoding/json"
	"errors"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// review is an incoming AdmissionReview, decoded only as far as the server needs: the request
// goes to the policy as the bytes kube-apiserver sent.
type review struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Request    json.RawMessage `json:"request"`
}

type requestMeta struct {
	UID    types.UID       `json:"uid"`
	Object json.RawMessage `json:"object"`
}

func decodeReview(body []byte) (review, requestMeta, error) {
	var r review
	if err := json.Unmarshal(body, &r); err != nil {
		return r, requestMeta{}, fmt.Errorf("decode AdmissionReview: %w", err)
	}
	if r.Kind != "AdmissionReview" || (r.APIVersion != "admission.k8s.io/v1" && r.APIVersion != "admission.k8s.io/v1beta1") {
		return r, requestMeta{}, fmt.Errorf("expected an admission.k8s.io/v1 AdmissionReview, got %s %s", r.APIVersion, r.Kind)
	}
	if len(r.Request) == 0 || string(r.Request) == "null" {
		return r, requestMeta{}, errors.New("AdmissionReview has no request")
	}
	var m requestMeta
	if err := json.Unmarshal(r.Request, &m); err != nil {
		return r, m, fmt.Errorf("decode AdmissionReview request: %w", err)
	}
	return r, m, nil
}

// encodeReview answers in the apiVersion the request came in, as kube-apiserver requires.
func encodeReview(apiVersion string, resp *admissionv1.AdmissionResponse) ([]byte, error) {
	return json.Marshal(struct {
		APIVersion string                         `json:"apiVersion"`
		Kind       string                         `json:"kind"`
		Response   *admissionv1.AdmissionResponse `json:"response"`
	}{apiVersion, "AdmissionReview", resp})
}

func deny(uid types.UID, code int32, message string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{
		UID:     uid,
		Allowed: false,
		Result:  &metav1.Status{Status: metav1.StatusFailure, Code: code, Message: message},
	}
}
