// Package signing signs and verifies the policy server's shared cache files, cosign style: a
// file's signature is the base64 ECDSA P-256 / SHA-256 signature of its bytes, kept beside it as
// <file>.sig (what `cosign sign-blob` writes and `cosign verify-blob --certificate signer.crt`
// checks). The signing key is issued by an internal CA; both live in the Secret
// regent-policy-server-<name>-signing that the controller creates. Only the leader reads the key;
// replicas trust a signature when signer.crt chains to ca.crt and its key verifies the bytes.
package signing
