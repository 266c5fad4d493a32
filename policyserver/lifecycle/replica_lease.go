package lifecycle

import (
	"context"
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// ReplicaLeaseName is the Lease replica n renews so the controller can tell live replicas from
// removed ones.
func ReplicaLeaseName(policyServer string, n int) string {
	return fmt.Sprintf("regent-policy-server-%s-replica-%d", policyServer, n)
}

// renewReplicaLease keeps the replica's Lease current until ctx is done, then deletes it: a
// replica stopped on purpose (scale down, rolling restart) leaves at once, so the controller prunes
// its conditions without waiting out the Lease; a crashed one is noticed when the Lease expires.
func renewReplicaLease(ctx context.Context, opts Options, kube kubernetes.Interface) {
	t := time.NewTicker(opts.RetryPeriod)
	defer t.Stop()
	for {
		if err := renewOnce(ctx, opts, kube); err != nil && ctx.Err() == nil {
			opts.Logger.Error(err, "could not renew the replica Lease")
		}
		select {
		case <-ctx.Done():
			if !opts.keepLeaseOnStop {
				releaseReplicaLease(opts, kube)
			}
			return
		case <-t.C:
		}
	}
}

func releaseReplicaLease(opts Options, kube kubernetes.Interface) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := kube.CoordinationV1().Leases(opts.Namespace).Delete(ctx, ReplicaLeaseName(opts.PolicyServer, opts.Replica), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		opts.Logger.Error(err, "could not release the replica Lease; it expires on its own")
	}
}

func renewOnce(ctx context.Context, opts Options, kube kubernetes.Interface) error {
	return renewLease(ctx, opts, kube, ReplicaLeaseName(opts.PolicyServer, opts.Replica), strconv.Itoa(opts.Replica))
}

// renewLeaderAddress keeps LeaderAddressLeaseName current, held by identity, while ctx (a
// RoleLeader process's leadership) lasts: the replicas of a policy server find the leader
// workload's address there. It is left in place when leadership ends: the next leader takes it
// over, and a replica trusts it only while it names the holder of the leader Lease.
func renewLeaderAddress(ctx context.Context, opts Options, kube kubernetes.Interface, identity string) {
	t := time.NewTicker(opts.RetryPeriod)
	defer t.Stop()
	for {
		if err := renewLease(ctx, opts, kube, LeaderAddressLeaseName(opts.PolicyServer), identity); err != nil && ctx.Err() == nil {
			opts.Logger.Error(err, "could not publish the leader's address; replicas wait for it, then compile for themselves")
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// renewLease creates or renews Lease name, held by holder, with this process's address and
// cache version.
func renewLease(ctx context.Context, opts Options, kube kubernetes.Interface, name, holder string) error {
	leases := kube.CoordinationV1().Leases(opts.Namespace)
	seconds := int32(opts.LeaseDuration / time.Second)
	now := metav1.NewMicroTime(opts.Clock.Now())
	// Where this replica serves its cache entries from, should it lead (transfer.go).
	annotations := map[string]string{CacheVersionAnnotation: opts.Version}
	if opts.AdvertiseAddress != "" {
		annotations[AddressAnnotation] = opts.AdvertiseAddress
	}
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: opts.Namespace, Annotations: annotations,
				Labels: map[string]string{"regent.dev/policy-server": opts.PolicyServer}},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, AcquireTime: &now, RenewTime: &now},
		}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != holder {
		l.Spec.HolderIdentity, l.Spec.AcquireTime = &holder, &now
	}
	l.Spec.LeaseDurationSeconds, l.Spec.RenewTime = &seconds, &now
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	delete(l.Annotations, AddressAnnotation) // an earlier process's address is not this one's
	for k, v := range annotations {
		l.Annotations[k] = v
	}
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}
