package bench

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub/propagator"
	"regent.dev/regent/test/benchproc"
)

// editMarker is what editRoot writes into the root's template; a replica carries the edit once its
// template holds it.
const editMarker = "prod-edited"

// editRoot edits root's template on a settled fleet and returns the seconds until every one of
// its clusters' replicas carries the edit, the seconds until its rollout succeeded again
// (progressive only, else 0), and the hub's requests and writes meanwhile, counted once it is
// quiet again.
func editRoot(b *testing.B, ctx context.Context, c client.WithWatch, ns, name string, clusters int, child *benchproc.Process, progressive bool) (secs, rolloutSecs, requests, writes float64) {
	selector := client.MatchingLabels{propagator.RootPolicyLabel: ns + "." + name}
	list := &policyv1.PolicyList{}
	if err := c.List(ctx, list, selector); err != nil {
		b.Fatal(err)
	}
	if len(list.Items) != clusters {
		b.Fatalf("%d replicas of %s/%s before the edit, want %d", len(list.Items), ns, name, clusters)
	}
	r0, w0 := child.Sum("rest_client_requests_total"), child.Writes()
	root := &policyv1.Policy{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, root); err != nil {
		b.Fatal(err)
	}
	began := time.Now()
	fleettest.Edit(b, c, root, func(p *policyv1.Policy) {
		raw := string(p.Spec.PolicyTemplates[0].ObjectDefinition.Raw)
		p.Spec.PolicyTemplates[0].ObjectDefinition.Raw = []byte(strings.Replace(raw, `"name":"prod"`, `"name":"`+editMarker+`"`, 1))
	})

	// Watched from before the edit, so no replica's change is missed; each watch lasts at most a
	// minute and one that cannot be resumed is replaced by a list (see waitForReplicas).
	carries := map[string]bool{}
	rv := list.ResourceVersion
	for len(carries) < clusters {
		if rv == "" {
			if err := c.List(ctx, list, selector); err != nil {
				b.Fatal(err)
			}
			for i := range list.Items {
				if hasEdit(&list.Items[i]) {
					carries[list.Items[i].Namespace] = true
				}
			}
			rv = list.ResourceVersion
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		w, err := c.Watch(wctx, &policyv1.PolicyList{}, selector, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv}})
		if err != nil {
			cancel()
			b.Fatal(err)
		}
		for ev := range w.ResultChan() {
			if ev.Type == watch.Error {
				rv = ""
				break
			}
			p, ok := ev.Object.(*policyv1.Policy)
			if !ok {
				continue
			}
			rv = p.ResourceVersion
			if hasEdit(p) {
				carries[p.Namespace] = true
				if len(carries) == clusters {
					break
				}
			}
		}
		w.Stop()
		cancel()
	}
	secs = time.Since(began).Seconds()
	if progressive {
		awaitRolledOut(b, ctx, c, ns, name, clusters, editMarker)
		rolloutSecs = time.Since(began).Seconds()
	}
	awaitQuiet(child, 0)
	return secs, rolloutSecs, child.Sum("rest_client_requests_total") - r0, child.Writes() - w0
}

func hasEdit(p *policyv1.Policy) bool {
	return len(p.Spec.PolicyTemplates) > 0 && strings.Contains(string(p.Spec.PolicyTemplates[0].ObjectDefinition.Raw), editMarker)
}

// awaitRolledOut waits until root's rollout succeeded on all its clusters: the root says so for
// its current generation, and every replica (carrying marker, when set) is enforced and was
// evaluated at its generation. The root is read from a watch's events: a root on 3,000 clusters is
// ~400 KB, and reading it from etcd several times a second took a quarter of the CPU of the
// apiserver the bench was measuring (Session 17's profile). It returns false if ctx ends first.
func awaitRolledOut(b *testing.B, ctx context.Context, c client.WithWatch, ns, name string, clusters int, marker string) bool {
	one := []client.ListOption{client.InNamespace(ns), client.MatchingFields{"metadata.name": name}}
	for {
		list := &policyv1.PolicyList{}
		if err := retrying(ctx, "list a root", func() error { return c.List(ctx, list, one...) }); err != nil {
			if ctx.Err() != nil {
				return false
			}
			b.Fatal(err)
		}
		if len(list.Items) == 1 && rolledOut(b, ctx, c, &list.Items[0], clusters, marker) {
			return true
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		w, err := c.Watch(wctx, &policyv1.PolicyList{}, append(one, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})...)
		if err != nil {
			cancel()
			if ctx.Err() != nil {
				return false
			}
			retryAfter(ctx, "watch a root", err) // then list again
			continue
		}
		done := false
		for ev := range w.ResultChan() {
			root, ok := ev.Object.(*policyv1.Policy)
			if !ok { // the watch ended with an error: list again
				break
			}
			if done = rolledOut(b, ctx, c, root, clusters, marker); done {
				break
			}
		}
		w.Stop()
		cancel()
		if done {
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
}

// rolledOut says whether root's status is a succeeded rollout of its generation on all clusters,
// and then whether its replicas agree.
func rolledOut(b *testing.B, ctx context.Context, c client.Client, root *policyv1.Policy, clusters int, marker string) bool {
	cond := meta.FindStatusCondition(root.Status.Conditions, policyv1.RolloutConditionType)
	if root.Status.RolloutStatus != policyv1.RolloutSucceeded || len(root.Status.Status) != clusters ||
		cond == nil || cond.ObservedGeneration != root.Generation {
		return false
	}
	list := &policyv1.PolicyList{}
	// A saturated apiserver may time a list out: a run of an hour must not end on one.
	if err := retrying(ctx, "list a root's replicas", func() error {
		return c.List(ctx, list, client.MatchingLabels{propagator.RootPolicyLabel: root.Namespace + "." + root.Name})
	}); err != nil {
		if ctx.Err() != nil {
			return false
		}
		b.Fatal(err)
	}
	if len(list.Items) != clusters {
		return false
	}
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.RemediationAction != policyv1.Enforce || p.Status.LastEvaluatedGeneration != p.Generation || (marker != "" && !hasEdit(p)) {
			return false
		}
	}
	return true
}
