package status

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteTable prints the answer as sections, each a question the user asks in turn.
func (w Why) WriteTable(dst io.Writer, now time.Time) error {
	var out strings.Builder
	w.write(&out, now)
	// Cells are aligned even where a line leaves its last one empty; the padding that leaves at
	// the end of a line is cut before printing.
	lines := strings.Split(out.String(), "\n")
	for i, l := range lines {
		lines[i] = strings.TrimRight(l, " ")
	}
	_, err := io.WriteString(dst, strings.Join(lines, "\n"))
	return err
}

func (w Why) write(out *strings.Builder, now time.Time) {
	fmt.Fprintf(out, "Policy %s/%s on cluster %s\n\n", w.Namespace, w.Policy, w.Cluster)
	fmt.Fprintln(out, "Placement:")
	if len(w.Placement) == 0 {
		fmt.Fprintln(out, "  no PlacementBinding binds the policy")
	}
	tw := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	for _, p := range w.Placement {
		chosen := "not chosen"
		if p.Chosen {
			chosen = "chosen, decision group " + or(p.Group, "0")
		}
		via := ""
		if p.PolicySet != "" {
			via = " via PolicySet " + p.PolicySet
		}
		fmt.Fprintf(tw, "  binding %s%s\t%s %s\t%s\t%s\n", p.Binding, via, p.Kind, p.Name, chosen, p.Detail)
	}
	tw.Flush()

	fmt.Fprintln(out, "\nRollout:")
	switch {
	case w.Rollout == nil:
		fmt.Fprintln(out, "  not selected: the cluster is in no decision group of the policy")
	default:
		c := w.Rollout
		fmt.Fprintf(out, "  group %s: %s, compliance %s, since %s\n", w.Group, or(string(c.Status), "-"), or(string(c.Compliance), "-"), age(*c, now))
		if c.Waiting != "" {
			fmt.Fprintf(out, "  waiting for %s\n", c.Waiting)
		}
	}

	fmt.Fprintln(out, "\nReplica:")
	if w.Replica == nil {
		fmt.Fprintf(out, "  none in namespace %s\n", w.Cluster)
	} else {
		r := w.Replica
		fmt.Fprintf(out, "  %s/%s: %s, generation %d, evaluated %d, compliance %s\n", w.Cluster, r.Name, or(r.RemediationAction, "-"),
			r.Generation, r.LastEvaluatedGeneration, or(string(r.Compliance), "-"))
	}

	fmt.Fprintln(out, "\nDependencies:")
	if len(w.Dependencies) == 0 {
		fmt.Fprintln(out, "  none declared")
	}
	for _, d := range w.Dependencies {
		fmt.Fprintf(out, "  %s\n", d)
	}
	for _, d := range w.Unmet {
		fmt.Fprintf(out, "  unmet: %s\n", d)
	}

	fmt.Fprintln(out, "\nTemplates:")
	if len(w.Templates) == 0 {
		fmt.Fprintln(out, "  no compliance reported yet")
	}
	tw = tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	for _, t := range w.Templates {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", strings.TrimSpace(t.Kind+" "+t.Name), or(string(t.Compliance), "-"), or(t.Message, "-"))
	}
	tw.Flush()

	fmt.Fprintln(out, "\nReport:")
	if w.Report == nil {
		fmt.Fprintln(out, "  no report rolled up from the cluster")
	} else {
		fmt.Fprintf(out, "  %s\n", w.Report)
	}
}

func (c Counts) String() string {
	return fmt.Sprintf("pass %d, fail %d, warn %d, error %d, skip %d", c.Pass, c.Fail, c.Warn, c.Error, c.Skip)
}
