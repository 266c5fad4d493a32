package opa

import (
	"context"
	"os"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// RemediatorLease is the Lease that elects the one hub replica whose remediator patches
// Placements: the webhook and the query API only read, so every replica serves them, but two
// remediators would evaluate every Placement twice and race each other's patches.
const RemediatorLease = "regent-placement-remediator"

// Lease timing, as controller-runtime's defaults; tests shorten them.
var (
	leaseDuration = 15 * time.Second
	renewDeadline = 10 * time.Second
	retryPeriod   = 2 * time.Second
)

func leaseIdentity() string {
	host, _ := os.Hostname()
	return host + "_" + string(uuid.NewUUID())
}

func leaseLock(kube kubernetes.Interface, namespace, identity string) resourcelock.Interface {
	return &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: namespace, Name: RemediatorLease},
		Client:     kube.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: identity},
	}
}

// leadRemediation runs remediate while this replica holds the Lease, and campaigns again when it
// loses it, until ctx ends; the Lease is released on the way out, so another replica takes over
// at once instead of after the lease duration.
func leadRemediation(ctx context.Context, lock resourcelock.Interface, remediate func(context.Context)) {
	for ctx.Err() == nil {
		leaderelection.RunOrDie(ctx, leaderelection.LeaderElectionConfig{
			Lock:            lock,
			LeaseDuration:   leaseDuration,
			RenewDeadline:   renewDeadline,
			RetryPeriod:     retryPeriod,
			ReleaseOnCancel: true,
			Name:            RemediatorLease,
			Callbacks: leaderelection.LeaderCallbacks{
				OnStartedLeading: remediate,
				OnStoppedLeading: func() {},
			},
		})
	}
}
