package status_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/cli/status"
)

func perGroup(cfg clusterv1alpha1.RolloutConfig) *clusterv1alpha1.RolloutStrategy {
	return &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup,
		ProgressivePerGroup: &clusterv1alpha1.RolloutProgressivePerGroup{RolloutConfig: cfg}}
}

func compliant(string) (policyv1.ComplianceState, string) {
	return policyv1.Compliant, "notification - ok"
}

// readRollout is what `regent status rollout` prints, as data.
func (e *env) readRollout(name string) status.Rollout {
	e.t.Helper()
	r, err := status.ReadRollout(e.ctx, e.c, e.ns, name, time.Now())
	if err != nil {
		e.t.Fatal(err)
	}
	return r
}

func clusterIn(r status.Rollout, name string) (status.Group, status.ClusterState) {
	for _, g := range r.Groups {
		for _, c := range g.Clusters {
			if c.Name == name {
				return g, c
			}
		}
	}
	return status.Group{}, status.ClusterState{}
}

func TestRollout_ProgressivePerGroup_ShowsGroupsSoakDeadlineAndWhatLaterGroupsWaitFor(t *testing.T) {
	e := newEnv(t)
	canary, prod1, prod2 := e.cluster("canary"), e.cluster("prod1"), e.cluster("prod2")
	e.startHub()
	e.rootPolicy("p", perGroup(clusterv1alpha1.RolloutConfig{MinSuccessTime: metav1.Duration{Duration: time.Hour}, ProgressDeadline: "2h"}))
	e.bind("p", "pl")
	e.decide("pl", 0, "canary", canary)
	e.decide("pl", 1, "prod", prod1, prod2)

	// The canary's turn: it is Progressing, against a deadline two hours out.
	e.eventually("canary progressing", func() (bool, string) {
		_, c := clusterIn(e.readRollout("p"), canary)
		return c.Status == policyv1.RolloutProgressing, fmt.Sprintf("%+v", c)
	})
	r := e.readRollout("p")
	g, c := clusterIn(r, canary)
	if g.Index != 0 || g.Name != "canary" {
		t.Errorf("canary in group %d %q, want 0 canary", g.Index, g.Name)
	}
	if c.DeadlineIn == nil || c.DeadlineIn.Duration <= time.Hour || c.DeadlineIn.Duration > 2*time.Hour {
		t.Errorf("canary deadline in %v, want between 1h and 2h (progressDeadline 2h from its transition)", c.DeadlineIn)
	}
	if r.Budget != nil || g.Budget == nil || g.Budget.Allowed != 0 {
		t.Errorf("per-group budget: rollout %+v, group %+v; want one per group, 0 failures allowed (maxFailures unset)", r.Budget, g.Budget)
	}

	// The canary succeeds and soaks an hour: prod waits for it.
	s := spoke{e: e, root: "p", answer: compliant}
	e.eventually("canary succeeded", func() (bool, string) {
		s.step(canary)
		_, c := clusterIn(e.readRollout("p"), canary)
		return c.Status == policyv1.RolloutSucceeded, fmt.Sprintf("%+v", c)
	})
	r = e.readRollout("p")
	_, c = clusterIn(r, canary)
	if c.SoakLeft == nil || c.SoakLeft.Duration <= 50*time.Minute || c.SoakLeft.Duration > time.Hour {
		t.Errorf("canary soak left %v, want just under 1h", c.SoakLeft)
	}
	_, p1 := clusterIn(r, prod1)
	if p1.Status != policyv1.RolloutToApply || !strings.Contains(p1.Waiting, "group 0 (canary) is not finished") {
		t.Errorf("prod1 %s waiting for %q, want ToApply waiting for the canary group", p1.Status, p1.Waiting)
	}
	if r.Status != policyv1.RolloutProgressing || !r.Current {
		t.Errorf("rollout %s (current %v), want Progressing for the current generation", r.Status, r.Current)
	}
	if err := status.RolloutResult(r); err != nil {
		t.Errorf("a progressing rollout ends the snapshot with %v, want nil (exit 0)", err)
	}
}

func TestRollout_FailedRolloutIsAnExitError(t *testing.T) {
	e := newEnv(t)
	c1, c2 := e.cluster("c1"), e.cluster("c2")
	e.startHub()
	e.rootPolicy("p", perGroup(clusterv1alpha1.RolloutConfig{MaxFailures: intstr.FromInt(0)}))
	e.bind("p", "pl")
	e.decide("pl", 0, "first", c1)
	e.decide("pl", 1, "second", c2)
	s := spoke{e: e, root: "p", answer: func(string) (policyv1.ComplianceState, string) {
		return policyv1.NonCompliant, "violation - configmaps [missing] not found"
	}}
	e.eventually("rollout failed", func() (bool, string) {
		s.step(c1)
		r := e.readRollout("p")
		return r.Status == policyv1.RolloutFailed && r.Current, string(r.Status)
	})
	r := e.readRollout("p")
	g, c := clusterIn(r, c1)
	if c.Status != policyv1.RolloutFailed || g.Budget == nil || !g.Budget.Spent || g.Budget.Used != 1 {
		t.Errorf("c1 %s, group budget %+v; want Failed with its group's budget spent (1 of 0)", c.Status, g.Budget)
	}
	_, second := clusterIn(r, c2)
	if !strings.Contains(second.Waiting, "failure budget is spent") {
		t.Errorf("c2 waiting for %q, want the spent budget named", second.Waiting)
	}
	var exit *status.ExitError
	if err := status.RolloutResult(r); !errors.As(err, &exit) || exit.Code != status.ExitFailed {
		t.Fatalf("snapshot of a failed rollout ended with %v, want exit code %d", err, status.ExitFailed)
	}

	// -w on a rollout that already failed ends at once, with the same code.
	var out syncBuffer
	err := status.WatchRollout(e.ctx, e.c, e.ns, "p", &out, status.WatchOptions{Timeout: time.Minute})
	if !errors.As(err, &exit) || exit.Code != status.ExitFailed {
		t.Fatalf("watch of a failed rollout ended with %v, want exit code %d; printed:\n%s", err, status.ExitFailed, out.String())
	}
}

func TestWatch_NotATerminal_PrintsPlainLinesUntilTheRolloutSucceeds(t *testing.T) {
	e := newEnv(t)
	canary, prod1, prod2 := e.cluster("canary"), e.cluster("prod1"), e.cluster("prod2")
	e.startHub()
	e.rootPolicy("p", perGroup(clusterv1alpha1.RolloutConfig{}))
	e.bind("p", "pl")
	e.decide("pl", 0, "canary", canary)
	e.decide("pl", 1, "prod", prod1, prod2)

	var out syncBuffer
	done := make(chan error, 1)
	go func() {
		done <- status.WatchRollout(e.ctx, e.c, e.ns, "p", &out, status.WatchOptions{Timeout: 2 * time.Minute})
	}()
	s := spoke{e: e, root: "p", answer: compliant}
	var err error
	giveUp := time.NewTimer(2 * time.Minute)
	defer giveUp.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case err = <-done:
			break wait
		case <-tick.C:
			s.step(canary, prod1, prod2)
		case <-giveUp.C:
			t.Fatalf("the watch did not end; printed:\n%s", out.String())
		}
	}
	if err != nil {
		t.Fatalf("watch ended with %v, want nil (Succeeded); printed:\n%s", err, out.String())
	}
	printed := out.String()
	for _, want := range []string{
		"group 0 canary: 0/1 succeeded",
		"group 0 canary: 1/1 succeeded",
		"group 1 prod: 0/2 succeeded, 2 ToApply",
		"group 1 prod: 2/2 succeeded",
		"rollout " + e.ns + "/p: Succeeded",
	} {
		if !strings.Contains(printed, want) {
			t.Errorf("watch output lacks %q:\n%s", want, printed)
		}
	}
	if strings.Contains(printed, "\x1b[") {
		t.Errorf("not a terminal, yet the output holds escape sequences:\n%q", printed)
	}
	// Each line is printed once, when it changes.
	seen := map[string]bool{}
	for _, l := range strings.Split(strings.TrimSpace(printed), "\n") {
		if seen[l] && !strings.HasPrefix(l, "rollout ") {
			t.Errorf("line %q printed twice", l)
		}
		seen[l] = true
	}
}

func TestWatch_TimeoutIsExitCodeTwo(t *testing.T) {
	e := newEnv(t)
	c1 := e.cluster("c1")
	e.startHub()
	e.rootPolicy("p", perGroup(clusterv1alpha1.RolloutConfig{}))
	e.bind("p", "pl")
	e.decide("pl", 0, "", c1)
	// Nobody answers: the rollout stays Progressing.
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	var exit *status.ExitError
	err := status.WatchRollout(ctx, e.c, e.ns, "p", &syncBuffer{}, status.WatchOptions{Timeout: 3 * time.Second})
	if !errors.As(err, &exit) || exit.Code != status.ExitTimeout {
		t.Fatalf("watch ended with %v, want exit code %d", err, status.ExitTimeout)
	}
}
