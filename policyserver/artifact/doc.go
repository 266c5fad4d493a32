// Package artifact pushes a policy module to an OCI registry in the form the policy server pulls
// (package lifecycle/pull): an OCI image manifest whose one layer, of media type
// application/vnd.wasm.content.layer.v1+wasm, is the module itself, with a config of media type
// application/vnd.wasm.config.v1+json — the layout Kubewarden's tooling pushes and pulls. Pulling
// goes through the policy server's own pull, so what `regent policy pull` gets is what a policy
// revision would get.
//
// With a key, a pushed artifact is signed as cosign signs an image: cosign's simple-signing
// payload naming the manifest digest, signed with the key, stored in the same repository as the
// image tagged sha256-<hex>.sig, its layer of media type
// application/vnd.dev.cosign.simplesigning.v1+json carrying the base64 signature in the
// dev.cosignproject.cosign/signature annotation; `cosign verify --key cosign.pub` accepts it. Keys
// are cosign's own (`cosign generate-key-pair`: an encrypted PEM, its password from
// COSIGN_PASSWORD) or unencrypted PKCS#8 PEM keys.
package artifact
