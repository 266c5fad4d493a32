// Command wapc-context is a Kubewarden context-aware waPC policy built as a Go wasip1 reactor. For
// a Pod it asks the host, through Kubewarden's host capabilities, what it cannot see in the
// request, and rejects the pod when the answer is not what its settings require:
//
//   - namespaceLabel: the pod's Namespace (kubernetes/get_resource) must carry this label;
//   - requireConfigMap: the pod's namespace must hold a ConfigMap matching this label selector
//     (kubernetes/list_resources_by_namespace);
//   - pinnedImages: every image must name the digest its registry reports for it
//     (oci/v1/manifest_digest);
//   - disableCache: get_resource bypasses the host's cache.
//
// A host error is a rejection that quotes it, as a Kubewarden SDK policy would fail. Every
// evaluation also logs one line through tracing/log.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o policy.wasm .
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unsafe"
)

//go:wasmimport wapc __guest_request
func guestRequest(operation unsafe.Pointer, payload unsafe.Pointer)

//go:wasmimport wapc __guest_response
func guestResponse(ptr unsafe.Pointer, size uint32)

//go:wasmimport wapc __guest_error
func guestError(ptr unsafe.Pointer, size uint32)

//go:wasmimport wapc __host_call
func hostCallRaw(binding unsafe.Pointer, bindingLen uint32, namespace unsafe.Pointer, namespaceLen uint32,
	operation unsafe.Pointer, operationLen uint32, payload unsafe.Pointer, payloadLen uint32) uint32

//go:wasmimport wapc __host_response_len
func hostResponseLen() uint32

//go:wasmimport wapc __host_response
func hostResponse(ptr unsafe.Pointer)

//go:wasmimport wapc __host_error_len
func hostErrorLen() uint32

//go:wasmimport wapc __host_error
func hostError(ptr unsafe.Pointer)

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
	guestResponse(unsafe.Pointer(&answer[0]), uint32(len(answer)))
	return 1
}

func main() {}

// ptr is the address of b's first byte; nil for an empty slice, which waPC allows with length 0.
func ptr(b []byte) unsafe.Pointer {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Pointer(&b[0])
}

// hostCall is waPC's guest side of a host call: the answer or the host's error message.
func hostCall(binding, namespace, operation string, payload []byte) ([]byte, error) {
	b, n, o := []byte(binding), []byte(namespace), []byte(operation)
	ok := hostCallRaw(ptr(b), uint32(len(b)), ptr(n), uint32(len(n)), ptr(o), uint32(len(o)), ptr(payload), uint32(len(payload))) == 1
	if !ok {
		msg := make([]byte, hostErrorLen()+1)
		hostError(unsafe.Pointer(&msg[0]))
		return nil, errors.New(string(msg[:len(msg)-1]))
	}
	resp := make([]byte, hostResponseLen()+1)
	hostResponse(unsafe.Pointer(&resp[0]))
	return resp[:len(resp)-1], nil
}

func callJSON(namespace, operation string, request, response any) error {
	payload, err := json.Marshal(request)
	if err != nil {
		return err
	}
	raw, err := hostCall("kubewarden", namespace, operation, payload)
	if err != nil {
		return err
	}
	if response == nil {
		return nil
	}
	return json.Unmarshal(raw, response)
}

type settings struct {
	NamespaceLabel   string `json:"namespaceLabel"`
	RequireConfigMap string `json:"requireConfigMap"`
	PinnedImages     bool   `json:"pinnedImages"`
	DisableCache     bool   `json:"disableCache"`
}

type validationRequest struct {
	Request struct {
		Namespace string `json:"namespace"`
		Object    struct {
			Spec struct {
				Containers []struct {
					Image string `json:"image"`
				} `json:"containers"`
			} `json:"spec"`
		} `json:"object"`
	} `json:"request"`
	Settings settings `json:"settings"`
}

type validationResponse struct {
	Accepted bool   `json:"accepted"`
	Message  string `json:"message,omitempty"`
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
		resp := validate(req)
		_ = callJSON("tracing", "log", map[string]any{"level": "info", "message": "pod evaluated",
			"namespace": req.Request.Namespace, "accepted": resp.Accepted}, nil)
		return json.Marshal(resp)
	case "validate_settings":
		var s settings
		if err := json.Unmarshal(payload, &s); err != nil {
			return json.Marshal(settingsResponse{Message: "settings: " + err.Error()})
		}
		if s.NamespaceLabel == "" && s.RequireConfigMap == "" && !s.PinnedImages {
			return json.Marshal(settingsResponse{Message: "settings must ask for namespaceLabel, requireConfigMap or pinnedImages"})
		}
		return json.Marshal(settingsResponse{Valid: true})
	case "protocol_version":
		return json.Marshal("v1")
	}
	return nil, fmt.Errorf("unknown operation %q", operation)
}

func validate(req validationRequest) validationResponse {
	s, ns := req.Settings, req.Request.Namespace
	if s.NamespaceLabel != "" {
		var obj struct {
			Metadata struct {
				Labels map[string]string `json:"labels"`
			} `json:"metadata"`
		}
		err := callJSON("kubernetes", "get_resource", map[string]any{
			"api_version": "v1", "kind": "Namespace", "name": ns, "disable_cache": s.DisableCache}, &obj)
		if err != nil {
			return validationResponse{Message: fmt.Sprintf("cannot read namespace %s: %v", ns, err)}
		}
		if _, ok := obj.Metadata.Labels[s.NamespaceLabel]; !ok {
			return validationResponse{Message: fmt.Sprintf("namespace %s lacks the label %s", ns, s.NamespaceLabel)}
		}
	}
	if s.RequireConfigMap != "" {
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		err := callJSON("kubernetes", "list_resources_by_namespace", map[string]any{
			"api_version": "v1", "kind": "ConfigMap", "namespace": ns, "label_selector": s.RequireConfigMap}, &list)
		if err != nil {
			return validationResponse{Message: fmt.Sprintf("cannot list ConfigMaps in %s: %v", ns, err)}
		}
		if len(list.Items) == 0 {
			return validationResponse{Message: fmt.Sprintf("namespace %s has no ConfigMap matching %s", ns, s.RequireConfigMap)}
		}
	}
	if s.PinnedImages {
		for _, c := range req.Request.Object.Spec.Containers {
			var digest struct {
				Digest string `json:"digest"`
			}
			if err := callJSON("oci", "v1/manifest_digest", c.Image, &digest); err != nil {
				return validationResponse{Message: fmt.Sprintf("cannot resolve image %s: %v", c.Image, err)}
			}
			if !strings.HasSuffix(c.Image, "@"+digest.Digest) {
				return validationResponse{Message: fmt.Sprintf("image %s is not pinned to its digest %s", c.Image, digest.Digest)}
			}
		}
	}
	return validationResponse{Accepted: true}
}
