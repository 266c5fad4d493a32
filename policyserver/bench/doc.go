// Command bench measures the policy server: /validate over HTTPS per runtime at several
// concurrencies, side by side with OPA's own server (`opa run --server`) evaluating the same
// Rego through its data API over HTTPS, with one load generator for both; cold compile vs
// compilation-cache hit per module; and resident memory per loaded policy.
//
//	go run ./policyserver/bench -opa /path/to/opa -duration 10s
//
// The policy server under test runs in a child process (this binary, "serve") so that its
// memory and CPU are its own.
package main
