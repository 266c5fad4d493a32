// Command wasi-flood is a WASI-mode policy that floods its stdout on purpose: it writes as many
// bytes as the request object's label "flood" says, in 64 KiB writes of one reused buffer (so the
// guest's own memory stays small), then accepts. Without a label it just accepts. It shows that
// what a guest writes cannot make the host hold more than its output limit.
package main

import (
	"encoding/json"
	"os"
	"strconv"
)

func main() {
	if len(os.Args) < 2 {
		os.Exit(2)
	}
	if os.Args[1] != "validate" {
		os.Stdout.WriteString(`{"valid":true}`)
		return
	}
	var req struct {
		Request struct {
			Object struct {
				Metadata struct {
					Labels map[string]string `json:"labels"`
				} `json:"metadata"`
			} `json:"object"`
		} `json:"request"`
	}
	if err := json.NewDecoder(os.Stdin).Decode(&req); err != nil {
		os.Stderr.WriteString("bad payload: " + err.Error())
		os.Exit(1)
	}
	n, _ := strconv.Atoi(req.Request.Object.Metadata.Labels["flood"])
	chunk := make([]byte, 64<<10)
	for i := range chunk {
		chunk[i] = 'x'
	}
	for written := 0; written < n; written += len(chunk) {
		os.Stdout.Write(chunk[:min(len(chunk), n-written)])
	}
	os.Stdout.WriteString(`{"accepted":true}`)
}
