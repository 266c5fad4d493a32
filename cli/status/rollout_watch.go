package status

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// WatchOptions tune WatchRollout.
type WatchOptions struct {
	// TTY redraws one progress bar per group in place; otherwise a plain line is printed for each
	// change, fit for logs and pipes.
	TTY bool
	// Timeout, when positive, gives up with ExitTimeout if the rollout has not finished.
	Timeout time.Duration
	Clock   clock.WithTicker
}

// WatchRollout follows the rollout of namespace/name through a watch on the root until it
// finishes: nil when it succeeded, an ExitError when it failed or the timeout passed. The root's
// status changes with every step of the rollout (the hub records each cluster there first), so
// one watch sees every step; the placements are re-read with it.
func WatchRollout(ctx context.Context, c client.WithWatch, namespace, name string, out io.Writer, opts WatchOptions) error {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Timeout)
		defer cancel()
	}
	var draw renderer = &plainRenderer{out: out}
	if opts.TTY {
		draw = &ttyRenderer{out: out}
	}
	var tick <-chan time.Time
	if opts.TTY {
		// Only the countdowns change between events; a terminal shows them moving.
		t := opts.Clock.NewTicker(time.Second)
		defer t.Stop()
		tick = t.C()
	}
	var last Rollout
	for {
		root := &policyv1.Policy{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, root); err != nil {
			return waitError(ctx, last, fmt.Errorf("get policy %s/%s: %w", namespace, name, err))
		}
		groups, err := propagator.ClusterGroups(ctx, c, root)
		if err != nil {
			return waitError(ctx, last, fmt.Errorf("placement of %s/%s: %w", namespace, name, err))
		}
		r := BuildRollout(root, groups, opts.Clock.Now())
		last = r
		draw.render(r)
		if done, _ := r.Finished(); done {
			return rolloutResult(r)
		}
		w, err := c.Watch(ctx, &policyv1.PolicyList{}, client.InNamespace(namespace), &client.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("metadata.name", name),
			// From the version just read, so no change in between is missed.
			Raw: &metav1.ListOptions{ResourceVersion: root.ResourceVersion},
		})
		if err != nil {
			return waitError(ctx, last, fmt.Errorf("watch policy %s/%s: %w", namespace, name, err))
		}
		// Between changes only the countdowns move: the same objects, a later time.
		redraw := func() { draw.render(BuildRollout(root, groups, opts.Clock.Now())) }
		err = waitForChange(ctx, w, tick, redraw)
		w.Stop()
		if err != nil {
			return waitError(ctx, last, err)
		}
	}
}

// waitForChange returns when the watch reports a change or ends (the caller reads again and
// watches anew); ticks only redraw.
func waitForChange(ctx context.Context, w watch.Interface, tick <-chan time.Time, redraw func()) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick:
			redraw()
		case ev, ok := <-w.ResultChan():
			if ok && ev.Type == watch.Error {
				// An expired resourceVersion or a failing apiserver: read again after a pause
				// rather than at once, so a broken watch does not turn into a busy loop.
				select {
				case <-ctx.Done():
					return ctx.Err()
				case <-time.After(time.Second):
				}
			}
			if !ok || ev.Type != watch.Bookmark {
				return nil
			}
		}
	}
}

// waitError turns the end of the wait into the command's result: a timeout while the rollout is
// still going is ExitTimeout.
func waitError(ctx context.Context, last Rollout, err error) error {
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return &ExitError{Code: ExitTimeout, Err: fmt.Errorf("timed out waiting for the rollout of %s/%s: %s", last.Namespace, last.Policy, last.statusLine())}
	}
	return err
}

type renderer interface{ render(Rollout) }

// plainRenderer prints a line per group whose state changed, and the rollout's status when it
// changes: what a log or CI output should hold.
type plainRenderer struct {
	out   io.Writer
	lines map[string]string
}

func (p *plainRenderer) render(r Rollout) {
	if p.lines == nil {
		p.lines = map[string]string{}
	}
	emit := func(key, line string) {
		if p.lines[key] != line {
			p.lines[key] = line
			fmt.Fprintln(p.out, line)
		}
	}
	emit("status", fmt.Sprintf("rollout %s/%s: %s", r.Namespace, r.Policy, r.statusLine()))
	for _, g := range r.Groups {
		emit("group "+g.label(), fmt.Sprintf("  group %s: %s", g.label(), groupSummary(g)))
	}
}

// ttyRenderer redraws a block of progress bars in place.
type ttyRenderer struct {
	out   io.Writer
	drawn int
}

const barWidth = 24

func (t *ttyRenderer) render(r Rollout) {
	var b strings.Builder
	if t.drawn > 0 {
		// Back to the top of the previous block, and clear it.
		fmt.Fprintf(&b, "\x1b[%dA\x1b[J", t.drawn)
	}
	lines := []string{fmt.Sprintf("%s/%s  %s", r.Namespace, r.Policy, r.statusLine())}
	width := 0
	for _, g := range r.Groups {
		width = max(width, len(g.label()))
	}
	for _, g := range r.Groups {
		lines = append(lines, fmt.Sprintf("  %-*s  %s  %s%s", width, g.label(), bar(g), groupSummary(g), nextWait(g)))
	}
	for _, l := range lines {
		b.WriteString(l)
		b.WriteString("\n")
	}
	t.drawn = len(lines)
	fmt.Fprint(t.out, b.String())
}

// bar draws a group: # succeeded, ~ progressing, ! failed or timed out, . waiting.
func bar(g Group) string {
	if len(g.Clusters) == 0 {
		return "[" + strings.Repeat(" ", barWidth) + "]"
	}
	var cells []byte
	for _, s := range []struct {
		status policyv1.RolloutStatus
		mark   byte
	}{{policyv1.RolloutSucceeded, '#'}, {policyv1.RolloutProgressing, '~'}, {policyv1.RolloutFailed, '!'}, {policyv1.RolloutTimeOut, '!'}} {
		n := g.Counts()[s.status] * barWidth / len(g.Clusters)
		cells = append(cells, []byte(strings.Repeat(string(s.mark), n))...)
	}
	if len(cells) < barWidth {
		cells = append(cells, []byte(strings.Repeat(".", barWidth-len(cells)))...)
	}
	return "[" + string(cells[:barWidth]) + "]"
}

// nextWait is the soonest soak end or deadline in the group, the time that moves it next.
func nextWait(g Group) string {
	var soak, deadline time.Duration = -1, -1
	for _, c := range g.Clusters {
		if c.SoakLeft != nil && (soak < 0 || c.SoakLeft.Duration < soak) {
			soak = c.SoakLeft.Duration
		}
		if c.DeadlineIn != nil && (deadline < 0 || c.DeadlineIn.Duration < deadline) {
			deadline = c.DeadlineIn.Duration
		}
	}
	var parts []string
	if soak >= 0 {
		parts = append(parts, "soak "+soak.String()+" left")
	}
	if deadline >= 0 {
		parts = append(parts, "deadline in "+deadline.String())
	}
	if len(parts) == 0 {
		return ""
	}
	return "  (" + strings.Join(parts, ", ") + ")"
}
