// Command wapc-labels-fastjson is wapc-labels' validation (the labels named in settings.required
// must be on the object) written the way Kubewarden's Go SDK policies read their input: with a
// parser that does not reflect (the SDK's TinyGo policies use gjson; this one uses fastjson,
// already in Regent's module graph). In a Go wasm guest encoding/json's reflection costs several
// hundred microseconds for a 500-byte request, most of such a policy's time, so the two guests
// side by side separate the host's cost from the guest's. It does not mutate.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o policy.wasm .
package main

import (
	"strconv"
	"strings"
	"unsafe"

	"github.com/valyala/fastjson"
)

//go:wasmimport wapc __guest_request
func guestRequest(operation unsafe.Pointer, payload unsafe.Pointer)

//go:wasmimport wapc __guest_response
func guestResponse(ptr unsafe.Pointer, size uint32)

//go:wasmimport wapc __guest_error
func guestError(ptr unsafe.Pointer, size uint32)

// parser is reused across calls: fastjson keeps its values' memory between parses, so a warm
// guest allocates little per request.
var parser fastjson.Parser

//go:wasmexport __guest_call
func guestCall(operationSize, payloadSize uint32) uint32 {
	buf := make([]byte, operationSize+payloadSize+2)
	guestRequest(unsafe.Pointer(&buf[0]), unsafe.Pointer(&buf[operationSize+1]))
	operation, payload := string(buf[:operationSize]), buf[operationSize+1:operationSize+1+payloadSize]
	answer, err := handle(operation, payload)
	if err != "" {
		msg := []byte(err + "\x00")
		guestError(unsafe.Pointer(&msg[0]), uint32(len(msg)-1))
		return 0
	}
	guestResponse(unsafe.Pointer(&answer[0]), uint32(len(answer)))
	return 1
}

func main() {}

func handle(operation string, payload []byte) ([]byte, string) {
	switch operation {
	case "validate":
		v, err := parser.ParseBytes(payload)
		if err != nil {
			return nil, "decode validation request: " + err.Error()
		}
		labels := v.GetObject("request", "object", "metadata", "labels")
		var missing []string
		for _, key := range v.GetArray("settings", "required") {
			name := string(key.GetStringBytes())
			if labels == nil || labels.Get(name) == nil {
				missing = append(missing, name)
			}
		}
		if len(missing) > 0 {
			return []byte(`{"accepted":false,"message":` + strconv.Quote("missing required labels: "+strings.Join(missing, ", ")) + `}`), ""
		}
		return []byte(`{"accepted":true}`), ""
	case "validate_settings":
		v, err := parser.ParseBytes(payload)
		if err != nil {
			return []byte(`{"valid":false,"message":` + strconv.Quote("settings must be {required: [string]}: "+err.Error()) + `}`), ""
		}
		required := v.GetArray("required")
		if len(required) == 0 {
			return []byte(`{"valid":false,"message":"settings.required must name at least one label"}`), ""
		}
		for _, r := range required {
			if r.Type() != fastjson.TypeString {
				return []byte(`{"valid":false,"message":"settings.required must be a list of label names"}`), ""
			}
		}
		return []byte(`{"valid":true}`), ""
	case "protocol_version":
		return []byte(`"v1"`), ""
	default:
		return nil, "unknown operation " + strconv.Quote(operation)
	}
}
