// Package localrun evaluates one admission policy on the author's machine exactly as a policy
// server would, like Kubewarden's `kwctl run`: the policy is loaded into a real policy server
// (package policyserver, with its engine and runtimes — waPC, WASI, OPA, Gatekeeper) and the
// AdmissionReview is handed to that server's own admission handler in process. What comes back
// is the server's answer byte for byte: fail-closed errors, mutation patches, monitor mode and
// custom rejection messages included, because none of that is re-implemented here.
//
// A policy comes from a file (.wasm, .rego, a Gatekeeper ConstraintTemplate .yaml) or from where
// a policy revision would pull it (registry://, https://), through the policy lifecycle's own
// pull. The server has no cluster behind it, so a context-aware policy's host calls fail as they
// do on a server started without host capabilities.
package localrun
