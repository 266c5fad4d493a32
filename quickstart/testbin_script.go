package quickstart

import (
	"os"
	"path/filepath"
)

// defaultTestbinScript is the repository's hack/testbin.sh: from the working directory when the
// quickstart runs from the clone, else beside the binary `make build` puts in <clone>/bin, so
// bin/regent quickstart also builds what is missing when started from another directory.
const defaultTestbinScript = "hack/testbin.sh"

// testbinScript resolves the script to run: script as given when set, else the default found
// from dir or from the executable exe; empty when neither has it.
func testbinScript(script, dir, exe string) string {
	if script != "" {
		return script
	}
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
