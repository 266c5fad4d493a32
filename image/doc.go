// Package image builds container images from a static binary without a container engine, with
// go-containerregistry: two layers (a minimal root filesystem — CA certificates, a non-root user
// in /etc/passwd and /etc/group, a writable /tmp — and the binary), an OCI config that runs as
// that user, and the OCI labels that say which source it came from.
//
// The same inputs give the same digest: every timestamp in the config, its history and the
// layers' tar headers is the build's Created time (SOURCE_DATE_EPOCH or the commit time), file
// owners and modes are fixed, and the CA bundle comes from a pinned Go module
// (golang.org/x/crypto/x509roots/fallback) rather than the build machine's /etc/ssl.
//
// The API is generic (binary, entrypoint, reference, version): Regent's own image and the small
// helper images the test fleet imports into containerd are built by it.
package image
