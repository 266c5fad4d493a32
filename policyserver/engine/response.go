package engine

import (
	"encoding/json"
	"fmt"
	"strings"
)

// Response is a policy's answer in Kubewarden's ValidationResponse shape, which every runtime's
// answer is translated into.
type Response struct {
	Accepted bool   `json:"accepted"`
	Message  string `json:"message,omitempty"`
	Code     int32  `json:"code,omitempty"`
	// MutatedObject is the object as the policy wants it (waPC and WASI policies only).
	MutatedObject    json.RawMessage   `json:"mutated_object,omitempty"`
	Warnings         []string          `json:"warnings,omitempty"`
	AuditAnnotations map[string]string `json:"audit_annotations,omitempty"`
	// Violations lists a Gatekeeper policy's violation messages one by one.
	Violations []string `json:"-"`
	// Causes are the reasons behind a rejection, one per field (a policy group's rejecting
	// members); they become the response's status.details.causes.
	Causes []Cause `json:"-"`
}

// Cause is one reason of a rejection.
type Cause struct {
	Field   string
	Message string
}

// SettingsResponse is Kubewarden's SettingsValidationResponse.
type SettingsResponse struct {
	Valid   bool   `json:"valid"`
	Message string `json:"message,omitempty"`
}

func decodeKubewardenResponse(raw []byte) (Response, error) {
	var r Response
	if err := json.Unmarshal(raw, &r); err != nil {
		return Response{}, fmt.Errorf("policy answered with something that is not a ValidationResponse (%q): %w", truncate(raw), err)
	}
	if string(r.MutatedObject) == "null" {
		r.MutatedObject = nil
	}
	return r, nil
}

// decodeOPAResponse reads Kubewarden's OPA contract: the entrypoint evaluates to an
// AdmissionReview whose response carries allowed and status (a bare {allowed, status} is taken
// too).
func decodeOPAResponse(raw []byte) (Response, error) {
	var set []struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return Response{}, fmt.Errorf("decode OPA result set %q: %w", truncate(raw), err)
	}
	if len(set) == 0 {
		return Response{}, fmt.Errorf("the policy's entrypoint is undefined for this input")
	}
	type status struct {
		Message string `json:"message"`
		Code    int32  `json:"code"`
	}
	type admissionResponse struct {
		Allowed  *bool    `json:"allowed"`
		Status   *status  `json:"status"`
		Warnings []string `json:"warnings"`
	}
	var review struct {
		Response *admissionResponse `json:"response"`
		admissionResponse
	}
	if err := json.Unmarshal(set[0].Result, &review); err != nil {
		return Response{}, fmt.Errorf("the policy's result is not an AdmissionReview (%q): %w", truncate(set[0].Result), err)
	}
	ar := review.Response
	if ar == nil {
		ar = &review.admissionResponse
	}
	if ar.Allowed == nil {
		return Response{}, fmt.Errorf("the policy's result has no response.allowed: %q", truncate(set[0].Result))
	}
	r := Response{Accepted: *ar.Allowed, Warnings: ar.Warnings}
	if ar.Status != nil {
		r.Message, r.Code = ar.Status.Message, ar.Status.Code
	}
	return r, nil
}

// decodeGatekeeperResponse reads a ConstraintTemplate's violation set: empty allows, otherwise
// the request is denied with every violation's msg.
func decodeGatekeeperResponse(raw []byte) (Response, error) {
	var set []struct {
		Result []struct {
			Msg string `json:"msg"`
		} `json:"result"`
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return Response{}, fmt.Errorf("decode violation set %q: %w", truncate(raw), err)
	}
	var msgs []string
	for _, s := range set {
		for _, v := range s.Result {
			msgs = append(msgs, v.Msg)
		}
	}
	if len(msgs) == 0 {
		return Response{Accepted: true}, nil
	}
	return Response{Accepted: false, Message: strings.Join(msgs, "; "), Violations: msgs}, nil
}

func decodeSettingsResponse(raw []byte) (SettingsResponse, error) {
	var r SettingsResponse
	if err := json.Unmarshal(raw, &r); err != nil {
		return r, fmt.Errorf("policy answered settings validation with %q: %w", truncate(raw), err)
	}
	return r, nil
}

func truncate(b []byte) string {
	const n = 200
	if len(b) > n {
		return string(b[:n]) + "…"
	}
	return string(b)
}
