// Command wapc-labels is a Kubewarden waPC policy built as a Go wasip1 reactor: it requires the
// labels named in its settings. A required label that has a default in the settings is added by
// mutating the object instead of rejecting it (the host only accepts the mutation when the policy
// is declared mutating).
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o policy.wasm .
package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"unsafe"
)

//go:wasmimport wapc __guest_request
func guestRequest(operation unsafe.Pointer, payload unsafe.Pointer)

//go:wasmimport wapc __guest_response
func guestResponse(ptr unsafe.Pointer, size uint32)

//go:wasmimport wapc __guest_error
func guestError(ptr unsafe.Pointer, size uint32)

// guestCall is the waPC entry point: the host has the operation name and payload ready and hands
// them over through __guest_request into buffers of the sizes given here.
//
//go:wasmexport __guest_call
func guestCall(operationSize, payloadSize uint32) uint32 {
	operation := make([]byte, operationSize+1)
	payload := make([]byte, payloadSize+1)
	guestRequest(unsafe.Pointer(&operation[0]), unsafe.Pointer(&payload[0]))
	answer, err := handle(string(operation[:operationSize]), payload[:payloadSize])
	if err != nil {
		msg := []byte(err.Error() + "\x00")
		guestError(unsafe.Pointer(&msg[0]), uint32(len(msg)-1))
		return 0
	}
	if len(answer) == 0 {
		answer = []byte("null")
	}
	guestResponse(unsafe.Pointer(&answer[0]), uint32(len(answer)))
	return 1
}

func main() {}

type settings struct {
	Required []string          `json:"required"`
	Defaults map[string]string `json:"defaults"`
}

// The object is kept raw and only its labels are decoded: the full object is decoded only when it
// has to be mutated, which keeps the common path cheap.
type validationRequest struct {
	Request struct {
		Object json.RawMessage `json:"object"`
	} `json:"request"`
	Settings settings `json:"settings"`
}

type validationResponse struct {
	Accepted      bool           `json:"accepted"`
	Message       string         `json:"message,omitempty"`
	Code          int            `json:"code,omitempty"`
	MutatedObject map[string]any `json:"mutated_object,omitempty"`
}

type settingsResponse struct {
	Valid   bool   `json:"valid"`
	Message string `json:"message,omitempty"`
}

func handle(operation string, payload []byte) ([]byte, error) {
	switch operation {
	case "validate":
		var req validationRequest
		if err := json.Unmarshal(payload, &req); err != nil {
			return nil, fmt.Errorf("decode validation request: %w", err)
		}
		return json.Marshal(validate(req))
	case "validate_settings":
		var s settings
		if err := json.Unmarshal(payload, &s); err != nil {
			return json.Marshal(settingsResponse{Message: "settings must be {required: [string], defaults: {string: string}}: " + err.Error()})
		}
		return json.Marshal(validateSettings(s))
	case "protocol_version":
		return json.Marshal("v1")
	default:
		return nil, fmt.Errorf("unknown operation %q", operation)
	}
}

func validate(req validationRequest) validationResponse {
	var meta struct {
		Metadata struct {
			Labels map[string]string `json:"labels"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(req.Request.Object, &meta); err != nil {
		return validationResponse{Message: "cannot decode the object: " + err.Error(), Code: 400}
	}
	labels := meta.Metadata.Labels
	var missing []string
	added := map[string]string{}
	for _, key := range req.Settings.Required {
		if _, ok := labels[key]; ok {
			continue
		}
		if def, ok := req.Settings.Defaults[key]; ok {
			added[key] = def
			continue
		}
		missing = append(missing, key)
	}
	if len(missing) > 0 {
		return validationResponse{Message: "missing required labels: " + strings.Join(missing, ", ")}
	}
	if len(added) == 0 {
		return validationResponse{Accepted: true}
	}
	var obj map[string]any
	if err := json.Unmarshal(req.Request.Object, &obj); err != nil {
		return validationResponse{Message: "cannot decode the object: " + err.Error(), Code: 400}
	}
	metadata, _ := obj["metadata"].(map[string]any)
	if metadata == nil {
		metadata = map[string]any{}
	}
	objLabels, _ := metadata["labels"].(map[string]any)
	if objLabels == nil {
		objLabels = map[string]any{}
	}
	for k, v := range added {
		objLabels[k] = v
	}
	metadata["labels"] = objLabels
	obj["metadata"] = metadata
	return validationResponse{Accepted: true, MutatedObject: obj}
}

func validateSettings(s settings) settingsResponse {
	if len(s.Required) == 0 {
		return settingsResponse{Message: "settings.required must name at least one label"}
	}
	for key := range s.Defaults {
		if !slices.Contains(s.Required, key) {
			return settingsResponse{Message: fmt.Sprintf("default for %q, which is not a required label", key)}
		}
	}
	return settingsResponse{Valid: true}
}
