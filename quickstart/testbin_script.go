package quickstart

import (
	"os"
	"path/filepath"
)

// defaultTestbinScript is the repository's hack/testbin.sh: from the working directory when the
// quickstart runs from the clone, else beside the binary `make build` puts in <clone>/bin, so
// bin/regent quickstart also builds what is missing when started from another directory.
const defaultTestbinScript = "hack/testbin.sh"

// FindTestbinScript is the clone's hack/testbin.sh found from the working directory or beside
// the running binary; empty when neither has it.
func FindTestbinScript() string {
	dir, _ := os.Getwd()
	exe, _ := os.Executable()
	return findTestbinScript(dir, exe)
}

func findTestbinScript(dir, exe string) string {
	candidates := []string{filepath.Join(dir, defaultTestbinScript)}
	if exe != "" {
		candidates = append(candidates, filepath.Join(filepath.Dir(exe), "..", defaultTestbinScript))
	}
	for _, c := range candidates {
		if _, err := os.Stat(c); err == nil {
			return filepath.Clean(c)
		}
	}
	return ""
}
