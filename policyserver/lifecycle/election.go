package lifecycle

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// LeaderLeaseName is the Lease the replicas of a policy server elect their leader with.
func LeaderLeaseName(policyServer string) string { return "regent-policy-server-" + policyServer }

// elect runs lead whenever this replica holds the leader Lease, until ctx is done. Losing the
// Lease stops lead and the replica campaigns again; it never exits, because it keeps serving.
func elect(ctx context.Context, opts Options, kube kubernetes.Interface, lead func(ctx context.Context)) error {
	identity := fmt.Sprintf("%d_%s", opts.Replica, rand.String(6))
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: opts.Namespace, Name: LeaderLeaseName(opts.PolicyServer)},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
	for ctx.Err() == nil {
		le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
			Lock: lock, LeaseDuration: opts.LeaseDuration, RenewDeadline: opts.RenewDeadline, RetryPeriod: opts.RetryPeriod,
			ReleaseOnCancel: !opts.keepLeaseOnStop,
			Name:            LeaderLeaseName(opts.PolicyServer),
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: func(ctx context.Context) {
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
