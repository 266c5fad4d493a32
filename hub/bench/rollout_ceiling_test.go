package bench

import (
	"context"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// rolloutCeiling is what the rollout ceiling measured: seconds until every replica existed, until
// every root's last group was answered (-1 when the budget ran out first), and the enforce updates
// a second its turns sent.
type rolloutCeiling struct {
	created, rolledOut, turnRate float64
}

// rolloutLoop is the apiserver's ceiling for a ProgressivePerGroup rollout: the writes any
// propagator must send for roots progressive roots over clusters in decision groups of 100, sent
// by a plain unthrottled client that keeps nothing but each replica's resourceVersion, with the
// same simulated spokes answering. 16 workers create every replica (group 0 enforce, the others
// inform) cluster after cluster, as the create-only ceiling does; then every root turns its groups
// in order, a group updated to enforce once each replica of the group before it was answered at
// its generation. Creates and updates share the 16 workers. budget, when positive, bounds the turns
// as REGENT_BENCH_ROLLOUT_BUDGET bounds the hub's.
func rolloutLoop(b *testing.B, ctx context.Context, kubeconfig string, clusters []string, roots int, prefix string, budget time.Duration) rolloutCeiling {
	c := ownConnection(b, kubeconfig)
	names := make([]string, roots)
	for r := range names {
		names[r] = fmt.Sprintf("%s.p%d", prefix, r)
	}
	req, err := labels.NewRequirement(propagator.RootPolicyLabel, selection.In, names)
	if err != nil {
		b.Fatal(err)
	}
	mine := client.MatchingLabelsSelector{Selector: labels.NewSelector().Add(*req)}
	t := newTurnTracker(names, clusters)
	followCtx, stop := context.WithCancel(ctx)
	defer stop()
	go spokes(followCtx, ownConnection(b, kubeconfig), mine)
	go follow(followCtx, ownConnection(b, kubeconfig), mine, t.seen, new(atomic.Int64), new(atomic.Int64))

	workers := make(chan struct{}, 16)
	write := func(what string, fn func() error) error {
		workers <- struct{}{}
		defer func() { <-workers }()
		return retrying(ctx, what, fn)
	}
	versions := make([]string, len(clusters)*roots)
	began := time.Now()
	parallel(16, len(versions), func(i int) error {
		r, k := i%roots, i/roots
		p := ceilingReplica(names[r], clusters[k], k < 100)
		return write("create", func() error {
			err := c.Create(ctx, p)
			if apierrors.IsAlreadyExists(err) { // a retried create whose first answer was lost
				err = c.Get(ctx, client.ObjectKeyFromObject(p), p)
			}
			versions[i] = p.ResourceVersion
			return err
		})
	})
	var out rolloutCeiling
	out.created = time.Since(began).Seconds()
	milestone("rollout ceiling: %d replicas created in %.1f s", len(versions), out.created)

	turnsCtx, stopTurns := ctx, context.CancelFunc(func() {})
	if budget > 0 {
		turnsCtx, stopTurns = context.WithTimeout(ctx, budget)
	}
	defer stopTurns()
	turnsBegan := time.Now()
	var updates atomic.Int64
	var wg sync.WaitGroup
	var outOfBudget atomic.Bool
	for r := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for g := 1; g < t.groups; g++ {
				select {
				case <-turnsCtx.Done():
					outOfBudget.Store(true)
					return
				case <-t.answered[r][g-1]:
				}
				parallel(16, min(100, len(clusters)-g*100), func(j int) error {
					k := g*100 + j
					p := ceilingReplica(names[r], clusters[k], true)
					p.ResourceVersion = versions[k*roots+r]
					err := write("update", func() error {
						err := c.Update(ctx, p)
						if apierrors.IsConflict(err) { // not expected: nothing else writes its spec
							if err = c.Get(ctx, client.ObjectKeyFromObject(p), p); err == nil {
								p.Spec.RemediationAction = policyv1.Enforce
								err = c.Update(ctx, p)
							}
						}
						return err
					})
					if err == nil {
						updates.Add(1)
					}
					return err
				})
			}
			select {
			case <-turnsCtx.Done():
				outOfBudget.Store(true)
			case <-t.answered[r][t.groups-1]:
			}
		}()
	}
	wg.Wait()
	b.Logf("rollout ceiling turns, as a watch saw them: %s", t.summary())
	out.turnRate = float64(updates.Load()) / time.Since(turnsBegan).Seconds()
	out.rolledOut = time.Since(began).Seconds()
	milestone("rollout ceiling: rolled out in %.1f s (out of budget: %t)", out.rolledOut, outOfBudget.Load())
	if outOfBudget.Load() {
		out.rolledOut = -1
	}
	return out
}

// ceilingReplica is the replica the hub would write: its labels and its root's spec, enforce or
// inform.
func ceilingReplica(name, cluster string, enforce bool) *policyv1.Policy {
	p := policy(name, cluster)
	p.Labels = map[string]string{propagator.RootPolicyLabel: name, propagator.ClusterNameLabel: cluster, propagator.ClusterNSLabel: cluster}
	if !enforce {
		p.Spec.RemediationAction = policyv1.Inform
	}
	p.Spec.RolloutStrategy = nil
	return p
}

// retrying runs fn until it succeeds, retrying a failure a second later up to 10 times: an
// apiserver at its limit answers some writes with a timeout or 429, and the ceiling should not be
// the one to give up.
func retrying(ctx context.Context, what string, fn func() error) error {
	var err error
	for range 10 {
		if err = fn(); err == nil || ctx.Err() != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "rollout ceiling: %s: %v; again in 1s\n", what, err)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	return err
}
