package verify

import "time"

// Format names the kind of a suite file.
type Format string

const (
	FormatGator      Format = "gator"
	FormatPolicyTest Format = "PolicyTest"
)

// Case is the outcome of one test case.
type Case struct {
	// Name is "<test>/<case>" for gator suites, the case's name for a PolicyTest.
	Name string `json:"name"`
	// Failure says why the case failed; empty when it passed or was skipped.
	Failure string `json:"failure,omitempty"`
	// Skipped says why the case did not run.
	Skipped string `json:"skipped,omitempty"`
}

// Suite is the outcome of one suite file.
type Suite struct {
	Path     string        `json:"path"`
	Format   Format        `json:"format"`
	Duration time.Duration `json:"-"`
	// Seconds is Duration for JSON readers (CI dashboards), which want seconds, not nanoseconds.
	Seconds float64 `json:"seconds"`
	Cases   []Case  `json:"cases"`
	// Error is why the suite could not run at all (an unreadable file, say); it fails the suite.
	Error string `json:"error,omitempty"`
}

// Counts tallies the suite's cases.
func (s Suite) Counts() (passed, failed, skipped int) {
	for _, c := range s.Cases {
		switch {
		case c.Failure != "":
			failed++
		case c.Skipped != "":
			skipped++
		default:
			passed++
		}
	}
	return passed, failed, skipped
}

// Failed reports whether the suite failed: an error or a failed case.
func (s Suite) Failed() bool {
	_, failed, _ := s.Counts()
	return s.Error != "" || failed > 0
}

// Report is the outcome of a run.
type Report struct {
	Suites []Suite `json:"suites"`
}

// Failed reports whether any suite failed.
func (r Report) Failed() bool {
	for _, s := range r.Suites {
		if s.Failed() {
			return true
		}
	}
	return false
}
