// Package pull fetches a policy module from where a policy says it lives — a local file
// (file:// or a plain path), an https:// URL, or an OCI registry (registry://, through
// go-containerregistry) — and records the sha256 digest of the bytes it got.
//
// A policy's author chooses the reference, so a pull is guarded: files are read only from the
// directories the operator allows (none by default); redirects never leave https for plain http
// and never reach loopback, private or link-local addresses unless the operator allows it; a
// reference ending in @sha256:<hex> pins what it gets (the manifest of a registry artifact, the
// bytes of anything else); modules are bounded in size and each pull in time.
package pull
