// Package signatures decides whether a policy module's OCI artifact is signed by someone the
// operator trusts, the check Kubewarden's policy server makes before it loads a module and the one
// behind the oci/v1/verify and oci/v2/verify host calls.
//
// Signatures are cosign's: for an artifact of manifest digest sha256:<hex>, an image tagged
// sha256-<hex>.sig in the same repository whose layers (media type
// application/vnd.dev.cosign.simplesigning.v1+json) each hold a simple-signing payload naming the
// digest, with the payload's signature, base64, in the layer annotation
// dev.cosignproject.cosign/signature. The payload's "optional" map carries the annotations given
// at signing time (`cosign sign -a env=prod`). This package reads that format with
// go-containerregistry and checks it with sigstore/sigstore; it does not depend on cosign.
//
// What is trusted is Kubewarden's verification-config (Config): requirements under allOf must all
// be met, and at least anyOf.minimumMatches (default 1) of those under anyOf. A requirement is met
// when one signature of the artifact satisfies it. Key-based requirements (kind pubKey) are
// verified; keyless ones (genericIssuer, githubAction) are refused when the configuration is read,
// with a message, since accepting them without checking certificates would trust anyone.
package signatures
