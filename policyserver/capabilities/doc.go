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
//     v1/verify and v2/verify for SigstorePubKeyVerify requests (package signatures: every key
//     must have signed the image's digest, with the annotations), answering {is_trusted, digest}
//     or an error saying which key or annotation is missing.
//   - net: v1/dns_lookup_host.
//   - crypto: v1/is_certificate_trusted.
//   - tracing: log, a guest's log line into the server's logger.
//
// Keyless and certificate verification requests (SigstoreKeylessVerify, …PrefixVerify,
// …GithubActionsVerify, …CertificateVerify) and oci v1/oci_manifest_config are not served: a
// guest asking for them gets an error that says so.
package capabilities
