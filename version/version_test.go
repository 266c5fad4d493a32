package version

import (
	"regexp"
	"testing"
)

// The Makefile, the image tag and `regent version` all read VERSION: it must stay one semver tag.
func TestVersionIsSemverTag(t *testing.T) {
	if !regexp.MustCompile(`^v\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(Version()) {
		t.Fatalf("VERSION %q is not a vMAJOR.MINOR.PATCH tag", Version())
	}
	if got, want := Image(), Repository+":"+Version(); got != want {
		t.Fatalf("Image() = %q, want %q", got, want)
	}
}
