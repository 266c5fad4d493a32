package lifecycle

import (
	"context"
	"fmt"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderLeaseName is the Lease the replicas of a policy server elect their leader with.
func LeaderLeaseName(policyServer string) string { return "regent-policy-server-" + policyServer }

// electionIdentity is this process's holder identity: what the replicas read to find the Lease
// carrying its address (holderName), then a random part, unique to the process.
func electionIdentity(opts Options) string {
	return fmt.Sprintf("%s_%s", opts.holderName(), rand.String(6))
}

// elect runs lead whenever this process holds the leader Lease, until ctx is done. Losing the
// Lease stops lead and the process campaigns again; it never exits, because it keeps serving.
func elect(ctx context.Context, opts Options, kube kubernetes.Interface, identity string, lead func(ctx context.Context)) error {
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: opts.Namespace, Name: LeaderLeaseName(opts.PolicyServer)},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	// client-go runs OnStartedLeading in a goroutine and returns from Run without waiting for it,
	// so a term that lost the Lease may still be unwinding (a pass finishing, its deferred
	// cleanup) when the next elector wins it again. term serialises the terms: the next starts
	// only once the previous has returned, so the two never run a pass, or flip the leader's
	// state, at the same time. ended stops a term that starts after elect returned.
	var term sync.Mutex
	ended := false
	defer func() {
		term.Lock()
		ended = true
		term.Unlock()
	}()
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod,
			ReleaseOnCancel: !opts.keepLeaseOnStop,
			Name:            LeaderLeaseName(opts.PolicyServer),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
					term.Lock()
					defer term.Unlock()
					if ended || ctx.Err() != nil {
						return // the Lease was lost again while the previous term unwound
					}
					opts.Logger.Info("leading", "lease", LeaderLeaseName(opts.PolicyServer), "identity", identity)
					lead(ctx)
				},
				OnStoppedLeading: func() { opts.Logger.Info("not leading", "identity", identity) },
			},
		})
		if err != nil {
			return fmt.Errorf("leader election: %w", err)
		}
		le.Run(ctx)
	}
	return nil
}
