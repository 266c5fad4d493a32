// Command wapc-flood is a waPC policy that logs in a loop on purpose: it writes as many lines as
// the request object's label "flood" says through waPC's __console_log and as many again through
// Kubewarden's tracing/log host capability, then accepts. A label "respond" makes its answer that
// many bytes long. It shows that guest logging is rate-limited and a guest's answer bounded.
//
// Build: GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o policy.wasm .
package main

import (
	"encoding/json"
	"strconv"
	"unsafe"
)

//go:wasmimport wapc __guest_request
func guestRequest(operation unsafe.Pointer, payload unsafe.Pointer)

//go:wasmimport wapc __guest_response
func guestResponse(ptr unsafe.Pointer, size uint32)

//go:wasmimport wapc __console_log
func consoleLog(ptr unsafe.Pointer, size uint32)

//go:wasmimport wapc __host_call
func hostCall(bindingPtr unsafe.Pointer, bindingLen uint32, namespacePtr unsafe.Pointer, namespaceLen uint32,
	operationPtr unsafe.Pointer, operationLen uint32, payloadPtr unsafe.Pointer, payloadLen uint32) uint32

func bytesOf(s string) (unsafe.Pointer, uint32) {
	b := []byte(s)
	return unsafe.Pointer(&b[0]), uint32(len(b))
}

//go:wasmexport __guest_call
func guestCall(operationSize, payloadSize uint32) uint32 {
	operation := make([]byte, operationSize+1)
	payload := make([]byte, payloadSize+1)
	guestRequest(unsafe.Pointer(&operation[0]), unsafe.Pointer(&payload[0]))
	answer := []byte(`{"valid":true}`)
	if string(operation[:operationSize]) == "validate" {
		var req struct {
			Request struct {
				Object struct {
					Metadata struct {
						Labels map[string]string `json:"labels"`
					} `json:"metadata"`
				} `json:"object"`
			} `json:"request"`
		}
		_ = json.Unmarshal(payload[:payloadSize], &req)
		labels := req.Request.Object.Metadata.Labels
		lines, _ := strconv.Atoi(labels["flood"])
		line := []byte("flooding the host's log")
		b, bl := bytesOf("kubewarden")
		n, nl := bytesOf("tracing")
		o, ol := bytesOf("log")
		p, pl := bytesOf(`{"level":"info","message":"flooding the host's log"}`)
		for range lines {
			consoleLog(unsafe.Pointer(&line[0]), uint32(len(line)))
			hostCall(b, bl, n, nl, o, ol, p, pl)
		}
		answer = []byte(`{"accepted":true}`)
		if size, _ := strconv.Atoi(labels["respond"]); size > len(answer) {
			// Valid JSON of the asked size: the answer padded with spaces.
			padded := make([]byte, size)
			copy(padded, answer)
			for i := len(answer); i < size; i++ {
				padded[i] = ' '
			}
			answer = padded
		}
	}
	guestResponse(unsafe.Pointer(&answer[0]), uint32(len(answer)))
	return 1
}

func main() {}
