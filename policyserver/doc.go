// Package policyserver is Regent's admission policy server: it serves Kubernetes admission
// webhooks (AdmissionReview v1 over HTTPS) by evaluating WebAssembly policies with the engine in
// policyserver/engine, one endpoint per policy and generation.
//
// Policies come from a configuration file shaped like Kubewarden's policies.yml (name →
// module, settings, mode, …); the file is watched and every change is applied without a
// restart: a new or changed policy is loaded beside the running one and swapped in atomically,
// a removed one is unloaded once its requests in flight finish, and a policy that fails to load
// leaves its previous revision serving. Part 2 of the policy server drives the same registry
// from PolicyRevisions instead of a file.
package policyserver
