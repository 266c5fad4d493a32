package propagator

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// A failed write must never push back the time the rollout asked to be looked at again: an error
// returned from Reconcile would replace it by the controller's backoff.
func TestRequeueAfter_KeepsTheRolloutsRecheck(t *testing.T) {
	recheck := 3 * time.Second
	for _, c := range []struct {
		name    string
		recheck *time.Duration
		retry   time.Duration
		want    time.Duration
	}{
		{"nothing to do", nil, 0, 0},
		{"rollout only", &recheck, 0, recheck},
		{"retry only", nil, time.Second, time.Second},
		{"retry sooner than the rollout", &recheck, time.Second, time.Second},
		{"rollout sooner than the retry", &recheck, time.Minute, recheck},
	} {
		if got := requeueAfter(c.recheck, c.retry); got != c.want {
			t.Errorf("%s: requeue after %v, want %v", c.name, got, c.want)
		}
	}
}

// Retries come soon after the first failure, then as far apart as the writes have been failing,
// bounded, however many other events reconcile the root meanwhile; one pass without failures
// starts over.
func TestWriteRetries_DoubleWithTheFailureAndAreBounded(t *testing.T) {
	var w writeRetries
	root := types.NamespacedName{Namespace: "ns", Name: "p"}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		at   time.Duration
		want time.Duration
	}{
		{0, writeRetryMin},
		{100 * time.Millisecond, writeRetryMin}, // an event-driven pass right after
		{time.Second, time.Second},
		{2 * time.Second, 2 * time.Second},
		{4 * time.Second, 4 * time.Second},
		{time.Hour, writeRetryMax},
	}
	for _, s := range steps {
		if got := w.next(root, true, t0.Add(s.at)); got != s.want {
			t.Errorf("failing since %v: retry after %v, want %v", s.at, got, s.want)
		}
	}
	if got := w.next(root, false, t0.Add(time.Hour)); got != 0 {
		t.Errorf("writes went through: retry after %v, want none", got)
	}
	if got := w.next(root, true, t0.Add(2*time.Hour)); got != writeRetryMin {
		t.Errorf("a new failure after a success: retry after %v, want %v", got, writeRetryMin)
	}
}

// A refusal on many clusters, or with a long error, stays a readable condition.
func TestRefusalMessage_NamesTenClustersAndBoundsEachError(t *testing.T) {
	refused := map[string]error{}
	for i := range 12 {
		refused[fmt.Sprintf("c%02d", i)] = errors.New("denied")
	}
	refused["c00"] = errors.New(strings.Repeat("x", 5000))
	msg := refusalMessage(refused, 20)
	if !strings.HasPrefix(msg, "replica writes failed on 12 clusters (20 selected); c00: ") {
		t.Errorf("message starts %.80q", msg)
	}
	if !strings.Contains(msg, "c09: denied; and 2 more") || strings.Contains(msg, "c10") {
		t.Errorf("message does not name exactly the first ten: %q", msg[len(msg)-80:])
	}
	if len(msg) > 2*maxErrorLength {
		t.Errorf("message of %d bytes: one error is not bounded", len(msg))
	}
	if got := refusalMessage(map[string]error{"c1": errors.New("denied")}, 3); got != "replica writes failed on 1 cluster (3 selected); c1: denied" {
		t.Errorf("one refusal: %q", got)
	}
}
