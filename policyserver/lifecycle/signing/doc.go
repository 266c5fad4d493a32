// Package signing signs and verifies the policy server's shared cache files, cosign style: a
// file's signature is the base64 ECDSA P-256 / SHA-256 signature of its bytes, kept beside it as
// <file>.sig (what `cosign sign-blob` writes and `cosign verify-blob --certificate signer.crt`
// checks). The signing key is issued by an internal CA. The certificates live in the Secret
// regent-policy-server-<name>-signing, which every replica reads to verify; the private key lives
// apart, in regent-policy-server-<name>-signing-key, which only the policy server's leader
// identity (its own ServiceAccount, regent-policy-server-<name>-leader) may get. A replica's
// token can therefore verify but never sign: taking over a serving replica does not let an
// attacker sign machine code for the others. Replicas trust a signature when signer.crt chains
// to ca.crt and its key verifies the bytes.
package signing
