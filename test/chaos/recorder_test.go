package chaos

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// observation is one replica version as a watch delivered it, in the order the apiserver
// committed them.
type observation struct {
	event       watch.EventType
	cluster     string
	uid         types.UID
	generation  int64
	version     string // the root's version the replica's template carries ("" if none)
	remediation policyv1.RemediationAction
	compliance  policyv1.ComplianceState
	evaluatedAt int64 // status.lastEvaluatedGeneration
}

// versionPattern finds the rollout version a replica's template carries.
var versionPattern = regexp.MustCompile(`chaos-v[0-9]+`)

func observe(event watch.EventType, p *policyv1.Policy) observation {
	o := observation{event: event, cluster: p.Namespace, uid: p.UID, generation: p.Generation,
		remediation: p.Spec.RemediationAction, compliance: p.Status.ComplianceState, evaluatedAt: p.Status.LastEvaluatedGeneration}
	if len(p.Spec.PolicyTemplates) > 0 && p.Spec.PolicyTemplates[0].ObjectDefinition.Raw != nil {
		o.version = versionPattern.FindString(string(p.Spec.PolicyTemplates[0].ObjectDefinition.Raw))
	}
	return o
}

// recorder keeps every replica version of one root it ever saw, on every cluster namespace, from
// a watch that resumes where it stopped (client-go's RetryWatcher), so no committed version is
// missed however long the run.
type recorder struct {
	mu   sync.Mutex
	seen []observation
	errs []string
	done chan struct{}
}

// policyWatcher is a cache.WatcherWithContext over replicated Policies with the given label
// selector.
type policyWatcher struct {
	c        client.WithWatch
	selector string
}

func (w policyWatcher) WatchWithContext(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.LabelSelector = w.selector
	return w.c.Watch(ctx, &policyv1.PolicyList{}, &client.ListOptions{Raw: &opts})
}

// record starts recording the replicas labelled selector from now on, until ctx ends.
func record(ctx context.Context, t *testing.T, c client.WithWatch, selector string) *recorder {
	t.Helper()
	list := &policyv1.PolicyList{}
	if err := c.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, policyWatcher{c: c, selector: selector})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{done: make(chan struct{})}
	go func() {
		defer close(r.done)
		defer w.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.ResultChan():
				if !ok {
					return
				}
				r.mu.Lock()
				if p, isPolicy := ev.Object.(*policyv1.Policy); isPolicy {
					r.seen = append(r.seen, observe(ev.Type, p))
				} else if ev.Type == watch.Error {
					r.errs = append(r.errs, fmt.Sprintf("watch error: %v", ev.Object))
				}
				r.mu.Unlock()
			}
		}
	}()
	return r
}

func (r *recorder) observations() []observation {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]observation(nil), r.seen...)
}

func (r *recorder) watchErrors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// outOfTurn returns every observation of a cluster carrying a version as enforce before all the
// clusters of earlier decision groups had been seen Compliant at that version, evaluated on a
// replica generation that carried it. groups maps each cluster to its decision group's index.
func outOfTurn(seen []observation, groups map[string]int) []string {
	// A status counts for the version its evaluated generation carried, as seen before it.
	versionOf := map[string]map[int64]string{}  // cluster → generation → version
	compliantAt := map[string]map[string]bool{} // cluster → versions seen Compliant
	checked := map[string]bool{}                // cluster/version whose first enforcement was checked
	var violations []string
	for i, o := range seen {
		if versionOf[o.cluster] == nil {
			versionOf[o.cluster], compliantAt[o.cluster] = map[int64]string{}, map[string]bool{}
		}
		versionOf[o.cluster][o.generation] = o.version
		if o.compliance == policyv1.Compliant {
			if v := versionOf[o.cluster][o.evaluatedAt]; v != "" {
				compliantAt[o.cluster][v] = true
			}
		}
		if o.remediation != policyv1.Enforce || o.version == "" || checked[o.cluster+"/"+o.version] {
			continue
		}
		checked[o.cluster+"/"+o.version] = true
		var waiting []string
		for other, g := range groups {
			if g < groups[o.cluster] && !compliantAt[other][o.version] {
				waiting = append(waiting, other)
			}
		}
		if len(waiting) > 0 {
			sort.Strings(waiting)
			violations = append(violations, fmt.Sprintf("observation %d: %s (group %d) enforces %s (generation %d) before %v of earlier groups were Compliant at it",
				i, o.cluster, groups[o.cluster], o.version, o.generation, waiting))
		}
	}
	return violations
}

// lostOrDuplicated returns every replica deletion and every cluster whose replica was seen with
// more than one UID (re-created), and every cluster of want with no replica at all.
func lostOrDuplicated(seen []observation, want []string) []string {
	uids := map[string]map[types.UID]bool{}
	var problems []string
	for i, o := range seen {
		if o.event == watch.Deleted {
			problems = append(problems, fmt.Sprintf("observation %d: replica on %s (uid %s) deleted", i, o.cluster, o.uid))
		}
		if uids[o.cluster] == nil {
			uids[o.cluster] = map[types.UID]bool{}
		}
		uids[o.cluster][o.uid] = true
	}
	for _, c := range want {
		switch n := len(uids[c]); {
		case n == 0:
			problems = append(problems, fmt.Sprintf("%s: no replica ever seen", c))
		case n > 1:
			problems = append(problems, fmt.Sprintf("%s: replica re-created, %d UIDs seen", c, n))
		}
	}
	return problems
}
