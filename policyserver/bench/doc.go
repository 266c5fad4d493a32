// Command bench measures the policy server: /validate over HTTPS per runtime at several
// concurrencies, side by side with OPA's own server (`opa run --server`) evaluating the same
// Rego through its data API over HTTPS, with one load generator for both; cold compile vs
// compilation-cache hit per module; and resident memory per loaded policy.
//
//	go run ./policyserver/bench -opa /path/to/opa -duration 10s
//
// With -sweep it runs instead an open loop (package loadgen) at fixed rates over Regent's Rego
// path, a native waPC policy and OPA's server on the same Rego, in one run, rotating the order at
// each rate, and gives each server's knee: the highest rate up to which every answer was correct
// with p99 within a bound. -cpuprofile then profiles Regent's server at one rate.
//
//	go run ./policyserver/bench -opa "$(bash hack/testbin.sh --print-dir)/opa" \
//		-sweep 500:3000:250 -p99-bound 10ms,50ms -duration 8s -warmup 2s \
//		-cpuprofile /tmp/rego.pprof -profile-rate 1000
//
// The policy server under test runs in a child process (this binary, "serve") so that its
// memory and CPU are its own.
package main
