package verify

import (
	"fmt"
	"io"
	"time"
)

// WriteSuite prints a suite's outcome as `go test` prints a package's: failures and skips first,
// one line each (passes too when verbose), then the suite's summary line with its time.
func WriteSuite(w io.Writer, s Suite, verbose bool) {
	for _, c := range s.Cases {
		switch {
		case c.Failure != "":
			fmt.Fprintf(w, "--- FAIL: %s: %s\n", c.Name, c.Failure)
		case c.Skipped != "":
			fmt.Fprintf(w, "--- SKIP: %s: %s\n", c.Name, c.Skipped)
		case verbose:
			fmt.Fprintf(w, "--- PASS: %s\n", c.Name)
		}
	}
	status := "ok  "
	if s.Failed() {
		status = "FAIL"
	}
	passed, failed, skipped := s.Counts()
	detail := fmt.Sprintf("%d passed, %d failed, %d skipped", passed, failed, skipped)
	if s.Error != "" {
		detail = "error: " + s.Error
	}
	fmt.Fprintf(w, "%s %s (%s) %s  %s\n", status, s.Path, s.Format, detail, s.Duration.Round(time.Millisecond))
}

// WriteSummary prints the run's totals.
func WriteSummary(w io.Writer, r Report) {
	var passed, failed, skipped, broken int
	for _, s := range r.Suites {
		p, f, sk := s.Counts()
		passed, failed, skipped = passed+p, failed+f, skipped+sk
		if s.Error != "" {
			broken++
		}
	}
	status := "PASS"
	if r.Failed() {
		status = "FAIL"
	}
	fmt.Fprintf(w, "%s: %d suites, %d cases passed, %d failed, %d skipped", status, len(r.Suites), passed, failed, skipped)
	if broken > 0 {
		fmt.Fprintf(w, ", %d suites could not run", broken)
	}
	fmt.Fprintln(w)
}
