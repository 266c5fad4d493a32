package fleettest

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// DumpLogs prints the last tailBytes of every log under dir that matches one of patterns, for
// a failed test. It writes to the test binary's stderr, not t.Log: go test prints a failed
// test's t.Log lines after its cleanups ran, so logs dumped there would bury the failure message
// under thousands of log lines, and a CI that keeps only the end of the output would lose it.
func DumpLogs(t testing.TB, dir string, tailBytes int, patterns ...string) {
	var logs []string
	for _, p := range patterns {
		m, _ := filepath.Glob(filepath.Join(dir, p))
		logs = append(logs, m...)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "=== logs of failed %s (%d files under %s; the failure itself follows them)\n", t.Name(), len(logs), dir)
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			fmt.Fprintf(&b, "--- %s: %v\n", l, err)
			continue
		}
		if len(data) > tailBytes {
			data = data[len(data)-tailBytes:]
		}
		fmt.Fprintf(&b, "--- tail of %s:\n%s\n", l, data)
	}
	_, _ = os.Stderr.WriteString(b.String())
}
