package rollup

import (
	"cmp"
	"encoding/json"
	"slices"
	"unicode/utf8"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"

	"regent.dev/regent/reports"
)

// Bounds of one rolled-up Report when the addon sets none.
const (
	// DefaultMaxResults is how many worst results a summary names.
	DefaultMaxResults = 10
	// DefaultMaxBytes bounds the serialised results of a summary: far below etcd's object limit
	// even for a hub holding one summary per cluster and policy.
	DefaultMaxBytes = 64 << 10
	// maxMessage is the longest message kept in a summary's result; a longer one is cut, so one
	// verbose policy cannot use up the byte bound by itself.
	maxMessage = 1024
)

// Part is one aggregated Report (or ClusterReport) of the cluster, with the replicated policy its
// policy belongs to.
type Part struct {
	Replicated string
	Summary    openreportsv1alpha1.ReportSummary
	Results    []openreportsv1alpha1.ReportResult
}

// Summary is what the hub gets for one replicated policy: every count, and the worst results.
type Summary struct {
	Replicated string
	Counts     openreportsv1alpha1.ReportSummary
	Worst      []openreportsv1alpha1.ReportResult
}

// Limits bound the worst results of a summary; zero fields take the defaults.
type Limits struct {
	MaxResults int
	MaxBytes   int
}

func (l Limits) withDefaults() Limits {
	if l.MaxResults <= 0 {
		l.MaxResults = DefaultMaxResults
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultMaxBytes
	}
	return l
}

// Summarize sums the parts of each replicated policy and keeps its worst results: fail before
// error before warn, ties in the aggregator's stable order (reports.CompareResults), at most
// MaxResults of them and no more than MaxBytes of them serialised. Pass and skip results are only
// counted. The output is sorted by replicated policy and does not depend on the order of parts.
func Summarize(parts []Part, limits Limits) []Summary {
	s := newSummarizer(limits)
	for _, p := range parts {
		s.add(p)
	}
	return s.summaries()
}

// summarizer is Summarize one part at a time: it keeps only counts and the worst results, so the
// reports it reads can be read a page at a time and dropped.
type summarizer struct {
	limits   Limits
	byPolicy map[string]*Summary
}

func newSummarizer(limits Limits) *summarizer {
	return &summarizer{limits: limits.withDefaults(), byPolicy: map[string]*Summary{}}
}

// add counts p and keeps what of its results is among its policy's worst; it copies what it keeps.
func (z *summarizer) add(p Part) {
	s := z.byPolicy[p.Replicated]
	if s == nil {
		s = &Summary{Replicated: p.Replicated}
		z.byPolicy[p.Replicated] = s
	}
	add(&s.Counts, p.Summary)
	for i := range p.Results {
		if severity(p.Results[i].Result) > 0 {
			s.Worst = keepWorst(s.Worst, &p.Results[i], z.limits.MaxResults)
		}
	}
}

func (z *summarizer) summaries() []Summary {
	out := make([]Summary, 0, len(z.byPolicy))
	for _, s := range z.byPolicy {
		s.Worst = withinBytes(s.Worst, z.limits.MaxBytes)
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Summary) int { return cmp.Compare(a.Replicated, b.Replicated) })
	return out
}

// severity ranks the results a summary names; 0 for those it only counts.
func severity(r openreportsv1alpha1.Result) int {
	switch r {
	case "fail":
		return 3
	case "error":
		return 2
	case "warn":
		return 1
	}
	return 0
}

func compareWorst(a, b openreportsv1alpha1.ReportResult) int {
	return cmp.Or(cmp.Compare(severity(b.Result), severity(a.Result)), reports.CompareResults(a, b))
}

// keepWorst inserts r into worst (sorted, at most n long) when it is among the n worst seen: a
// cluster with 100,000 failures costs n comparisons each, not a sort of all of them.
func keepWorst(worst []openreportsv1alpha1.ReportResult, r *openreportsv1alpha1.ReportResult, n int) []openreportsv1alpha1.ReportResult {
	if len(worst) == n && compareWorst(*r, worst[n-1]) >= 0 {
		return worst
	}
	c := *r.DeepCopy()
	c.Description = cut(c.Description, maxMessage)
	i, _ := slices.BinarySearchFunc(worst, c, compareWorst)
	worst = slices.Insert(worst, i, c)
	if len(worst) > n {
		worst = worst[:n]
	}
	return worst
}

// withinBytes keeps the longest prefix of results whose serialised size stays within max.
func withinBytes(results []openreportsv1alpha1.ReportResult, max int) []openreportsv1alpha1.ReportResult {
	total := 2 // the list's brackets
	for i := range results {
		b, err := json.Marshal(&results[i])
		if err != nil || total+len(b)+1 > max {
			return results[:i:i]
		}
		total += len(b) + 1 // the comma between list items
	}
	return results
}

// cut shortens s to at most n bytes on a rune boundary, marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const mark = "…"
	end := n - len(mark)
	for end > 0 && !utf8.RuneStart(s[end]) {
		end--
	}
	return s[:end] + mark
}

func add(into *openreportsv1alpha1.ReportSummary, s openreportsv1alpha1.ReportSummary) {
	into.Pass += s.Pass
	into.Fail += s.Fail
	into.Warn += s.Warn
	into.Error += s.Error
	into.Skip += s.Skip
}
