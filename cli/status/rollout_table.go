package status

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// WriteTable prints the rollout as kubectl prints objects: a header of what the rollout is, then
// one line per cluster, grouped. now gives the clusters' ages.
func (r Rollout) WriteTable(w io.Writer, now time.Time) error {
	fmt.Fprintf(w, "Policy:    %s/%s (generation %d)\n", r.Namespace, r.Policy, r.Generation)
	fmt.Fprintf(w, "Strategy:  %s\n", r.strategyLine())
	fmt.Fprintf(w, "Status:    %s\n", r.statusLine())
	if r.Budget != nil {
		fmt.Fprintf(w, "Budget:    %s\n", r.Budget)
	}
	var perGroup []string
	for _, g := range r.Groups {
		if g.Budget != nil {
			perGroup = append(perGroup, fmt.Sprintf("group %s: %s", g.label(), g.Budget))
		}
	}
	if len(perGroup) > 0 {
		fmt.Fprintf(w, "Budget:    %s\n", strings.Join(perGroup, "; "))
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "GROUP\tCLUSTER\tROLLOUT\tCOMPLIANCE\tSINCE\tVIOLATIONS\tWAITING FOR")
	for _, g := range r.Groups {
		for i, c := range g.Clusters {
			group := ""
			if i == 0 {
				group = g.label()
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", group, c.Name, or(string(c.Status), "-"), or(string(c.Compliance), "-"),
				age(c, now), violations(c), or(c.Waiting, "-"))
		}
	}
	return tw.Flush()
}

func (r Rollout) strategyLine() string {
	parts := []string{string(r.Strategy)}
	if !r.Progressive && r.Strategy != "All" {
		parts = []string{string(r.Strategy) + " (not applied: the policy only informs, so every cluster gets it at once)"}
	}
	if r.MinSuccessTime != "" {
		parts = append(parts, "minSuccessTime "+r.MinSuccessTime)
	}
	if r.ProgressDeadline != "" {
		parts = append(parts, "progressDeadline "+r.ProgressDeadline)
	}
	return strings.Join(parts, ", ")
}

func (r Rollout) statusLine() string {
	if !r.Current {
		return "not started for this generation: the hub has not recorded it yet"
	}
	s := string(r.Status)
	if r.Message != "" {
		s += " (" + r.Message + ")"
	}
	return s
}

func (b Budget) String() string {
	s := fmt.Sprintf("%d failed of %d allowed", b.Used, b.Allowed)
	if b.Spent {
		s += ", spent: the rollout stopped"
	}
	return s
}

func (g Group) label() string {
	s := fmt.Sprint(g.Index)
	if g.Index < 0 {
		s = "-"
	}
	if g.Name != "" {
		s += " " + g.Name
	}
	if g.Mandatory {
		s += " (mandatory)"
	}
	return s
}

func age(c ClusterState, now time.Time) string {
	if c.Since == nil {
		return "-"
	}
	return duration.HumanDuration(now.Sub(c.Since.Time))
}

func violations(c ClusterState) string {
	if c.Violations == nil {
		return "-"
	}
	return fmt.Sprint(*c.Violations)
}

func or(s, fallback string) string {
	if s == "" {
		return fallback
	}
	return s
}

// groupSummary is a group's state in one line: how many succeeded and what the rest do.
func groupSummary(g Group) string {
	counts := g.Counts()
	parts := []string{fmt.Sprintf("%d/%d succeeded", counts[policyv1.RolloutSucceeded], len(g.Clusters))}
	for _, s := range []policyv1.RolloutStatus{policyv1.RolloutProgressing, policyv1.RolloutToApply, policyv1.RolloutFailed, policyv1.RolloutTimeOut} {
		if counts[s] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[s], s))
		}
	}
	return strings.Join(parts, ", ")
}
