package propagator

import (
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1 "regent.dev/regent/api/policy/v1"
)

func TestHoldable_AnswersAndTurnsWaitButFailuresClocksAndTheEndDoNot(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	// A rollout of 10 clusters: 0–4 Progressing (their turn), 5–9 ToApply.
	base := func() *policyv1.PolicyStatus {
		s := &policyv1.PolicyStatus{RolloutStatus: policyv1.RolloutProgressing, Conditions: []metav1.Condition{
			{Type: rolloutCondition, Status: metav1.ConditionFalse, Reason: "Progressing", Message: "0 of 10 clusters succeeded", LastTransitionTime: metav1.NewTime(t0)},
			{Type: propagatedCondition, Status: metav1.ConditionTrue, Reason: "Propagated", Message: "replicated to 10 clusters", LastTransitionTime: metav1.NewTime(t0)},
		}, Status: lines(10, policyv1.RolloutToApply, t0)}
		for i := range 5 {
			s.Status[i].RolloutStatus = policyv1.RolloutProgressing
		}
		return s
	}
	line := func(s *policyv1.PolicyStatus, i int, status policyv1.RolloutStatus, c policyv1.ComplianceState) *policyv1.PolicyStatus {
		s.Status[i].RolloutStatus, s.Status[i].ComplianceState = status, c
		if status != base().Status[i].RolloutStatus {
			s.Status[i].LastTransitionTime = &metav1.Time{Time: t1}
		}
		return s
	}
	succeeded := func(s *policyv1.PolicyStatus, n int) *policyv1.PolicyStatus {
		for i := range n {
			line(s, i, policyv1.RolloutSucceeded, policyv1.Compliant)
		}
		s.Conditions[0].Message = "n of 10 clusters succeeded"
		return s
	}
	none, soak, deadline := clocks{}, clocks{soak: true}, clocks{deadline: true}
	cases := []struct {
		name   string
		after  *policyv1.PolicyStatus
		clocks clocks
		answer bool
	}{
		{"clusters in their turn succeed", succeeded(base(), 3), none, true},
		{"an inform cluster reports its compliance", line(base(), 7, policyv1.RolloutToApply, policyv1.Compliant), none, true},
		{"a count of violations arrives", func() *policyv1.PolicyStatus {
			s := base()
			s.Status[2].Violations = new(int64)
			return s
		}(), none, true},
		{"a success while a soak time counts from it", succeeded(base(), 3), soak, false},
		{"the next clusters get their turn", line(succeeded(base(), 5), 5, policyv1.RolloutProgressing, ""), none, true},
		{"a turn while a deadline counts from it", line(succeeded(base(), 5), 5, policyv1.RolloutProgressing, ""), deadline, false},
		{"a turn with a soak time (a turn does not start it)", line(base(), 5, policyv1.RolloutProgressing, ""), soak, true},
		{"a turn and its answer at once", line(base(), 5, policyv1.RolloutSucceeded, policyv1.Compliant), none, true},
		{"a turn and its answer while a soak time counts", line(base(), 5, policyv1.RolloutSucceeded, policyv1.Compliant), soak, false},
		{"a turn answered by a failure", line(base(), 5, policyv1.RolloutFailed, policyv1.NonCompliant), none, false},
		{"a cluster fails", line(base(), 1, policyv1.RolloutFailed, policyv1.NonCompliant), none, false},
		{"a cluster times out", line(base(), 1, policyv1.RolloutTimeOut, ""), none, false},
		{"a cluster goes back to waiting", line(base(), 1, policyv1.RolloutToApply, ""), none, false},
		{"the root's compliance changes", func() *policyv1.PolicyStatus {
			s := line(base(), 7, policyv1.RolloutToApply, policyv1.NonCompliant)
			s.ComplianceState = policyv1.NonCompliant
			return s
		}(), none, false},
		{"the rollout ends", func() *policyv1.PolicyStatus {
			s := succeeded(base(), 5)
			s.Conditions[0].Reason, s.Conditions[0].Status = "Succeeded", metav1.ConditionTrue
			return s
		}(), none, false},
		{"another condition changes", func() *policyv1.PolicyStatus {
			s := succeeded(base(), 1)
			s.Conditions[1].Message = "replicated to 9 clusters"
			return s
		}(), none, false},
		{"a cluster leaves", func() *policyv1.PolicyStatus {
			s := base()
			s.Status = s.Status[:9]
			return s
		}(), none, false},
	}
	for _, c := range cases {
		if got := holdable(base(), c.after, c.clocks); got != c.answer {
			t.Errorf("%s: holdable = %v, want %v", c.name, got, c.answer)
		}
	}

	done := base()
	done.Conditions[0].Reason = "Succeeded"
	if holdable(done, line(done, 7, policyv1.RolloutToApply, policyv1.Compliant), none) {
		t.Errorf("a rollout that is not in progress holds nothing back")
	}
}

func TestStatusPace_HoldsFromTheFirstAnswerUntilTheIntervalOrAWrite(t *testing.T) {
	var p statusPace
	a, b := types.NamespacedName{Namespace: "ns", Name: "a"}, types.NamespacedName{Namespace: "ns", Name: "b"}
	t0 := time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC)
	if w := p.wait(a, 5*time.Second, t0); w != 5*time.Second {
		t.Errorf("a first answer waits %v, want the whole interval", w)
	}
	if w := p.wait(a, 5*time.Second, t0.Add(2*time.Second)); w != 3*time.Second {
		t.Errorf("an answer 2 s later waits %v, want 3s: the interval counts from the first", w)
	}
	if w := p.wait(b, 5*time.Second, t0.Add(2*time.Second)); w != 5*time.Second {
		t.Errorf("another root's first answer waits %v, want 5s", w)
	}
	if w := p.wait(a, 5*time.Second, t0.Add(6*time.Second)); w != 0 {
		t.Errorf("past the interval: waits %v, want 0", w)
	}
	p.forget(a)
	if w := p.wait(a, 5*time.Second, t0.Add(7*time.Second)); w != 5*time.Second {
		t.Errorf("after a write, the next answer waits %v, want the whole interval again", w)
	}
}

func TestStatusInterval_GrowsWithTheRootsLinesFromTheConfiguredOne(t *testing.T) {
	for _, c := range []struct {
		configured time.Duration
		lines      int
		want       time.Duration
	}{
		{0, 3, DefaultStatusInterval},
		{0, 500, DefaultStatusInterval},
		{0, 3000, 30 * time.Second},
		{0, 6000, time.Minute},
		{0, 20000, time.Minute},
		{0, 60000, 2 * time.Minute},
		{0, 150000, 5 * time.Minute},
		{0, 1000000, 5 * time.Minute},
		{time.Second, 3, time.Second},
		{time.Second, 300, 3 * time.Second},
		{time.Hour, 3000, time.Hour},
		{-1, 3000, 0},
	} {
		if got := statusInterval(c.configured, c.lines); got != c.want {
			t.Errorf("statusInterval(%v, %d lines) = %v, want %v", c.configured, c.lines, got, c.want)
		}
	}
}

// The interval counts the lines of every root whose rollout progresses: twenty roots of 3,000
// clusters cost the apiserver twenty times one root's writes at one root's interval.
func TestStatusPace_TheIntervalCountsEveryProgressingRootsLines(t *testing.T) {
	var s statusPace
	a, b := types.NamespacedName{Namespace: "team", Name: "a"}, types.NamespacedName{Namespace: "team", Name: "b"}
	steps := []struct {
		name string
		step func() time.Duration
		want time.Duration
	}{
		{"a alone, 2,000 lines", func() time.Duration { return s.progress(a, 2000, 0) }, 20 * time.Second},
		{"b progresses too, 1,000 lines", func() time.Duration { return s.progress(b, 1000, 0) }, 30 * time.Second},
		{"a grows to 3,000 lines", func() time.Duration { return s.progress(a, 3000, 0) }, 40 * time.Second},
		{"a's rollout ends", func() time.Duration { return s.progress(a, 0, 0) }, 10 * time.Second},
		{"b is deleted", func() time.Duration { s.gone(b); return s.progress(a, 0, 0) }, DefaultStatusInterval},
		{"six roots of 3,000: a minute", func() time.Duration {
			for i := range 6 {
				s.progress(types.NamespacedName{Namespace: "team", Name: fmt.Sprint(i)}, 3000, 0)
			}
			return s.progress(a, 0, 0)
		}, time.Minute},
		{"fifty roots of 3,000: 2 ms a line past the minute, up to five", func() time.Duration {
			for i := range 50 {
				s.progress(types.NamespacedName{Namespace: "team", Name: fmt.Sprint(i)}, 3000, 0)
			}
			return s.progress(a, 0, 0)
		}, 5 * time.Minute},
		{"twenty of them left", func() time.Duration {
			for i := 20; i < 50; i++ {
				s.progress(types.NamespacedName{Namespace: "team", Name: fmt.Sprint(i)}, 0, 0)
			}
			return s.progress(a, 0, 0)
		}, 2 * time.Minute},
	}
	for _, st := range steps {
		if got := st.step(); got != st.want {
			t.Errorf("%s: interval %v, want %v", st.name, got, st.want)
		}
	}
}
