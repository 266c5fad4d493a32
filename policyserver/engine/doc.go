// Package engine evaluates Kubernetes admission requests with WebAssembly policies on wazero.
//
// A policy is a wasm module plus the settings, mode and limits it runs with. The engine compiles
// each distinct module once (keyed by its SHA-256 digest, backed by wazero's compilation cache,
// optionally on disk) and keeps a small pool of ready instances per loaded policy, because
// creating an instance — for a Go guest, starting its runtime — costs milliseconds while a call
// into a warm one costs microseconds.
//
// Four ABIs run unchanged, selected by the policy's execution mode as in Kubewarden:
//   - kubewarden-wapc: the waPC protocol (guest export __guest_call, host module "wapc");
//   - wasi: a WASI command, argv "validate" / "validate-settings", JSON on stdin and stdout;
//   - opa: Rego compiled to wasm (OPA's wasm ABI), input {request}, data = settings;
//   - gatekeeper: a ConstraintTemplate's Rego, input {review, parameters}, empty violation set
//     allows; data is the policy's Inventory (data.inventory, Gatekeeper's replicated objects).
//
// Every evaluation runs under a deadline (a runaway guest is interrupted, not waited for: by fuel
// checks the engine adds at every loop head and function entry, which look at the call's context
// about every million instructions, or through wazero's close-on-context-done for a module it cannot rewrite; see
// loop_checks.go) and a memory limit; guests get no filesystem and no
// network. A waPC guest may ask the engine's Host for Kubewarden's host capabilities (cluster
// lookups limited to its policy's ContextAwareResources, registry digests, …); those calls run
// under the same deadline. Rego policies get only an allow-list of pure built-ins, and the
// network ones (http.send, …) when their Spec allows them. Everything a guest makes the host hold
// outside its memory (stdout, answers, payloads) is bounded by an output limit that traps it, and
// its logging is rate-limited per policy.
package engine
