// Package corpora locates the third-party corpora (OCM's policy-collection, Gatekeeper's library)
// that some tests check Regent against. They are not part of the repository: a plain clone runs
// every test on the project's own fixtures, and the corpus checks run only when REGENT_CORPORA
// names the folder that holds them (CI sets it to the shared testdata beside the clone). A set variable whose folder
// is missing fails the test rather than skipping it, so CI can never pass by not finding them.
package corpora

import (
	"os"
	"path/filepath"
	"testing"
)

// Env names the folder holding policy-collection/ and gatekeeper-library/.
const Env = "REGENT_CORPORA"

// Dir returns REGENT_CORPORA/sub, skipping t when the variable is unset and failing it when the
// folder is missing.
func Dir(t testing.TB, sub string) string {
	t.Helper()
	root := os.Getenv(Env)
	if root == "" {
		t.Skipf("%s is not set: the %s corpus check runs only when it names the corpora folder", Env, sub)
	}
	if !filepath.IsAbs(root) {
		// go test runs each package in its own folder, so a relative path would mean a different
		// place for every package.
		t.Fatalf("%s=%s must be an absolute path", Env, root)
	}
	dir := filepath.Join(root, sub)
	if info, err := os.Stat(dir); err != nil || !info.IsDir() {
		t.Fatalf("%s=%s but %s is not a folder (%v)", Env, root, dir, err)
	}
	return dir
}
