package rollup

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
)

func result(result, subject, message string) openreportsv1alpha1.ReportResult {
	return openreportsv1alpha1.ReportResult{Policy: "p", Rule: "r", Result: openreportsv1alpha1.Result(result), Description: message,
		Subjects: []corev1.ObjectReference{{Namespace: "ns", Name: subject}}}
}

func names(results []openreportsv1alpha1.ReportResult) []string {
	out := make([]string, 0, len(results))
	for _, r := range results {
		out = append(out, string(r.Result)+":"+r.Subjects[0].Name)
	}
	return out
}

func TestSummarize(t *testing.T) {
	tests := []struct {
		name      string
		parts     []Part
		limits    Limits
		wantCount openreportsv1alpha1.ReportSummary
		wantWorst []string
	}{
		{
			name: "CountsSumOverPartsAndNamespaces_WorstIsFailThenErrorThenWarn",
			parts: []Part{
				{Replicated: "ns.p", Summary: openreportsv1alpha1.ReportSummary{Pass: 2, Warn: 1, Skip: 1},
					Results: []openreportsv1alpha1.ReportResult{result("pass", "a", ""), result("warn", "b", "w"), result("skip", "c", ""), result("pass", "d", "")}},
				{Replicated: "ns.p", Summary: openreportsv1alpha1.ReportSummary{Fail: 1, Error: 1},
					Results: []openreportsv1alpha1.ReportResult{result("error", "e", "boom"), result("fail", "f", "bad")}},
			},
			wantCount: openreportsv1alpha1.ReportSummary{Pass: 2, Fail: 1, Warn: 1, Error: 1, Skip: 1},
			wantWorst: []string{"fail:f", "error:e", "warn:b"},
		},
		{
			name: "OnlyTheNWorstAreKept_TiesInStableOrder",
			parts: []Part{{Replicated: "ns.p", Summary: openreportsv1alpha1.ReportSummary{Fail: 4, Warn: 1}, Results: []openreportsv1alpha1.ReportResult{
				result("warn", "a", ""), result("fail", "d", ""), result("fail", "b", ""), result("fail", "e", ""), result("fail", "c", "")}}},
			limits:    Limits{MaxResults: 3},
			wantCount: openreportsv1alpha1.ReportSummary{Fail: 4, Warn: 1},
			wantWorst: []string{"fail:b", "fail:c", "fail:d"},
		},
		{
			name: "ByteBoundStopsBeforeTheResultThatWouldCrossIt",
			parts: []Part{{Replicated: "ns.p", Summary: openreportsv1alpha1.ReportSummary{Fail: 3}, Results: []openreportsv1alpha1.ReportResult{
				result("fail", "a", strings.Repeat("m", 450)), result("fail", "b", strings.Repeat("m", 450)), result("fail", "c", "")}}},
			limits:    Limits{MaxBytes: 1200},
			wantCount: openreportsv1alpha1.ReportSummary{Fail: 3},
			wantWorst: []string{"fail:a", "fail:b"},
		},
		{
			name:      "OnlyPassesGiveCountsAndNoResults",
			parts:     []Part{{Replicated: "ns.p", Summary: openreportsv1alpha1.ReportSummary{Pass: 1}, Results: []openreportsv1alpha1.ReportResult{result("pass", "a", "")}}},
			wantCount: openreportsv1alpha1.ReportSummary{Pass: 1},
			wantWorst: []string{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Summarize(tt.parts, tt.limits)
			if len(got) != 1 {
				t.Fatalf("%d summaries, want 1", len(got))
			}
			if got[0].Counts != tt.wantCount {
				t.Errorf("counts %+v, want %+v", got[0].Counts, tt.wantCount)
			}
			if w := names(got[0].Worst); !slices.Equal(w, tt.wantWorst) {
				t.Errorf("worst %v, want %v", w, tt.wantWorst)
			}
			b, _ := json.Marshal(got[0].Worst)
			if max := tt.limits.withDefaults().MaxBytes; len(b) > max {
				t.Errorf("worst results take %d bytes, bound %d", len(b), max)
			}
		})
	}
}

func TestSummarize_SamePartsInAnyOrderGiveTheSameSummaries(t *testing.T) {
	var parts []Part
	for i := range 40 {
		parts = append(parts, Part{Replicated: fmt.Sprintf("ns.p%d", i%3), Summary: openreportsv1alpha1.ReportSummary{Fail: 1},
			Results: []openreportsv1alpha1.ReportResult{result([]string{"fail", "warn", "error"}[i%3], fmt.Sprintf("s%02d", i), "")}})
	}
	want, _ := json.Marshal(Summarize(parts, Limits{MaxResults: 4}))
	slices.Reverse(parts)
	got, _ := json.Marshal(Summarize(parts, Limits{MaxResults: 4}))
	if string(got) != string(want) {
		t.Errorf("order of parts changed the summaries:\n%s\n%s", got, want)
	}
	var summaries []Summary
	_ = json.Unmarshal(got, &summaries)
	if len(summaries) != 3 || summaries[0].Replicated != "ns.p0" || summaries[2].Replicated != "ns.p2" {
		t.Errorf("summaries not one per replicated policy in name order: %s", got)
	}
}

func TestSummarize_LongMessageIsCutOnARuneBoundary(t *testing.T) {
	long := strings.Repeat("é", 2000) // two bytes each
	got := Summarize([]Part{{Replicated: "ns.p", Results: []openreportsv1alpha1.ReportResult{result("fail", "a", long)}}}, Limits{})
	msg := got[0].Worst[0].Description
	if len(msg) > maxMessage || !utf8.ValidString(msg) || !strings.HasSuffix(msg, "…") {
		t.Errorf("message of %d bytes, valid UTF-8 %v, marked %v", len(msg), utf8.ValidString(msg), strings.HasSuffix(msg, "…"))
	}
}
