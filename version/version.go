// Package version is Regent's release version, one source of truth: the VERSION file beside this
// file, embedded in every binary and read by the Makefile to tag the image. The image name every
// manifest and Go default carries is built from it, so nothing refers to a moving ":latest".
package version

import (
	_ "embed"
	"strings"
)

//go:embed VERSION
var file string

// Revision is the VCS revision the Makefile stamps with -ldflags "-X"; empty in a plain go build
// (the Go toolchain's own vcs.revision fills in when it is recorded).
var Revision string

// Repository is where Regent's image is published; users push to their own with crane (README).
const Repository = "ghcr.io/regent-dev/regent"

// Version is the release this source tree is, e.g. v0.1.0.
func Version() string { return strings.TrimSpace(file) }

// Image is Regent's image at this version: what manifests and defaults run.
func Image() string { return Repository + ":" + Version() }
