// Command bench measures the hub's placement API with a large replicated inventory: it starts a
// hub apiserver (the fleet's binaries, `make testbin`), creates N ManagedClusters with realistic
// labels, annotations and status, runs the placement engine and API in a child process (this
// binary, "serve", which calls opa.Serve as `regent hub --placement-api-addr` does) and, beside
// it, OPA's own server (`opa run --server`, the version go.mod pins) loaded with the same policy
// and the inventory Regent serves; then drives both over HTTPS with one closed-loop load
// generator, A-B-B-A, and prints throughput, p50/p99 and memory.
//
//	go run ./placement/opa/bench -opa "$(bash hack/testbin.sh --print-dir)/opa" -clusters 10000
package main
