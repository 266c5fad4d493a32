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
// when one signature of the artifact satisfies it; when none does, the signature that came
// closest says why.
//
// A pubKey requirement is met by a signature made with its key. Keyless ones (genericIssuer,
// githubAction) are met by a cosign keyless signature: a layer that also carries a Fulcio
// certificate (dev.sigstore.cosign/certificate, with its chain) and a Rekor bundle
// (dev.sigstore.cosign/bundle). Such a signature counts when the certificate names the identity
// asked for (SAN email or URI; OIDC issuer from Fulcio's extension 1.3.6.1.4.1.57264.1.8 or .1.1;
// GitHub workflow repository from .1.5), the signature verifies with the certificate's key, the
// bundle's SignedEntryTimestamp verifies with a Rekor key of the TrustRoot and records this very
// signature (its bytes, the payload's hash, the key), the logged time falls inside the
// certificate's validity, and the certificate chains to a Fulcio CA of the TrustRoot at that time.
// The TrustRoot is a Sigstore trusted root (sigstore-go's root package reads it, from Kubewarden's
// ClientTrustConfig); without one, keyless requirements are refused (ErrNoTrustRoot) rather than
// fetched from the public-good instance. The SignedEntryTimestamp is checked here rather than with
// sigstore-go's tlog package, whose Rekor entry types would bring in much of Rekor for a signature
// over four canonical JSON fields.
//
// Certificate builds the requirement of a policy's SigstoreCertificateVerify request, which is no
// kind of the verification-config.
package signatures
