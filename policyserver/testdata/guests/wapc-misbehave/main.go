// Command wapc-misbehave is a waPC policy that misbehaves on purpose, as chosen by its settings,
// so the host's defences can be tested: "loop" never returns, "allocate" grows memory until the
// host's limit stops it, "trap" panics, anything else accepts.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o policy.wasm .
package main

import (
	"encoding/json"
	"unsafe"
)

//go:wasmimport wapc __guest_request
func guestRequest(operation unsafe.Pointer, payload unsafe.Pointer)

//go:wasmimport wapc __guest_response
func guestResponse(ptr unsafe.Pointer, size uint32)

//go:wasmexport __guest_call
func guestCall(operationSize, payloadSize uint32) uint32 {
	operation := make([]byte, operationSize+1)
	payload := make([]byte, payloadSize+1)
	guestRequest(unsafe.Pointer(&operation[0]), unsafe.Pointer(&payload[0]))
	var answer []byte
	switch string(operation[:operationSize]) {
	case "validate":
		var req struct {
			Settings struct {
				Behaviour string `json:"behaviour"`
			} `json:"settings"`
		}
		_ = json.Unmarshal(payload[:payloadSize], &req)
		misbehave(req.Settings.Behaviour)
		answer = []byte(`{"accepted":true}`)
	case "validate_settings":
		answer = []byte(`{"valid":true}`)
	default:
		answer = []byte(`"v1"`)
	}
	guestResponse(unsafe.Pointer(&answer[0]), uint32(len(answer)))
	return 1
}

var sink [][]byte

func misbehave(behaviour string) {
	switch behaviour {
	case "loop":
		n := 0
		for {
			n++
		}
	case "allocate":
		for {
			block := make([]byte, 1<<20)
			for i := range block {
				block[i] = byte(i)
			}
			sink = append(sink, block)
		}
	case "trap":
		panic("policy panicked on purpose")
	}
}

func main() {}
