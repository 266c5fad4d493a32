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
	UID types.UID `json:"uid"`
}

// requestUID reads the request's uid. kube-apiserver writes it first, so reading the first key
// and its value with the byte scanner of requestLabels avoids decoding the whole request a
// second time (that decode cost more than a Rego evaluation) and json.Decoder's allocations
// (which cost a third of the review's decode); any other layout falls back to a full decode.
// The request was validated with the review, so the scan runs over valid JSON.
func requestUID(request json.RawMessage) (types.UID, error) {
	s := scanner{b: request}
	if s.consume('{') {
		if key, ok := s.str(); ok && string(key) == "uid" && s.consume(':') {
			if start := s.skipWS(); start < len(request) && request[start] == '"' && s.skipValue() {
				var uid string
				stringInto(request[start:s.i], &uid)
				return types.UID(uid), nil
			}
		}
	}
	var m requestMeta
	if err := json.Unmarshal(request, &m); err != nil {
		return "", fmt.Errorf("decode AdmissionReview request: %w", err)
	}
	return m.UID, nil
}

// requestObject reads the object under review; only a mutation needs it.
func requestObject(request json.RawMessage) (json.RawMessage, error) {
	var r struct {
		Object json.RawMessage `json:"object"`
	}
	if err := json.Unmarshal(request, &r); err != nil {
		return nil, fmt.Errorf("decode AdmissionReview request object: %w", err)
	}
	return r.Object, nil
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
	uid, err := requestUID(r.Request)
	return r, requestMeta{UID: uid}, err
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
