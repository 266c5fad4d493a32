// Package capabilities serves Kubewarden's host capabilities to waPC policies, so context-aware
// Kubewarden policies run unchanged: a guest calls __host_call with binding "kubewarden", a
// namespace and an operation, and gets JSON back in the shapes Kubewarden's SDKs expect.
//
// Served:
//   - kubernetes: get_resource, list_resources_by_namespace, list_resources_all (through a
//     dynamic client; apiVersion and kind resolved by discovery) and can_i (a
//     SubjectAccessReview). Reads are limited to the kinds in the calling policy's
//     contextAwareResources; answers are reused for a few seconds (Kubewarden's five), unless the
//     request asks for disable_cache (Kubewarden defines it for get_resource and can_i).
//   - oci: v1/manifest_digest and v1/oci_manifest, cached for a minute as in Kubewarden;
//     v1/verify and v2/verify (package signatures), answering {is_trusted, digest} or an error
//     saying which key, identity or annotation is missing. Each request stands for the
//     verification-config requirements Kubewarden reads it as, all to be met:
//     SigstorePubKeyVerify (every key), SigstoreKeylessVerify (every issuer and exact subject),
//     SigstoreKeylessPrefixVerify (every issuer and subject URL prefix),
//     SigstoreGithubActionsVerify (a workflow of owner, and repo) and SigstoreCertificateVerify
//     (a signature by a given certificate's key, chained to a given chain, logged if asked). The
//     keyless ones are checked against Options.Sigstore, the PolicyServer's sigstoreTrustConfig,
//     and refused without one.
//   - net: v1/dns_lookup_host.
//   - crypto: v1/is_certificate_trusted.
//   - tracing: log, a guest's log line into the server's logger.
//
// oci v1/oci_manifest_config is not served: a guest asking for it gets an error that says so.
package capabilities
