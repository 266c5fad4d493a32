// Package pull fetches a policy module from where a policy says it lives — a local file
// (file:// or a plain path), an https:// URL, or an OCI registry (registry://, through
// go-containerregistry) — and records the sha256 digest of the bytes it got.
package pull
