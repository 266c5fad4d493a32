package admissionpolicy

import (
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

// replicaLeasePrefix is the start of the name of every replica Lease of policy server ps; the
// replica number follows it. The policy server's replicas create and renew them.
func replicaLeasePrefix(ps string) string { return serverObjectName(ps) + "-replica-" }

// serverObjectName names the policy server's objects: StatefulSet, Service, leader Lease.
func serverObjectName(ps string) string { return "regent-policy-server-" + ps }

// liveReplicas is the set of replicas whose Lease is current at now, and the earliest moment one
// of them stops being current (zero when none is live), so the controller can look again then: an
// expiring Lease sends no event.
func liveReplicas(ps string, leases []coordinationv1.Lease, now time.Time) (map[int32]bool, time.Time) {
	live := map[int32]bool{}
	var nextExpiry time.Time
	prefix := replicaLeasePrefix(ps)
	for _, l := range leases {
		if !strings.HasPrefix(l.Name, prefix) {
			continue
		}
		n, ok := replicaNumber(l, prefix)
		expiry := leaseExpiry(l)
		if !ok || !expiry.After(now) {
			continue
		}
		live[n] = true
		if nextExpiry.IsZero() || expiry.Before(nextExpiry) {
			nextExpiry = expiry
		}
	}
	return live, nextExpiry
}

// leaseExpiry is when the Lease stops being current unless renewed; zero when never renewed.
func leaseExpiry(l coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil || l.Spec.LeaseDurationSeconds == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Add(time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second)
}

// replicaNumber reads the replica from the Lease's holder, as the contract says, falling back to
// the name so a Lease created before its first holder is written still counts.
func replicaNumber(l coordinationv1.Lease, prefix string) (int32, bool) {
	s := strings.TrimPrefix(l.Name, prefix)
	if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
		s = *l.Spec.HolderIdentity
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0, false
	}
	return int32(n), true
}

// policyServerOfLease reads the policy server from a replica Lease's name.
func policyServerOfLease(name string) (string, bool) {
	const prefix = "regent-policy-server-"
	i := strings.LastIndex(name, "-replica-")
	if !strings.HasPrefix(name, prefix) || i < len(prefix) {
		return "", false
	}
	return name[len(prefix):i], true
}

// leaderLeaseHeld says whether some process holds the leader Lease of ps at now.
func leaderLeaseHeld(ps string, leases []coordinationv1.Lease, now time.Time) bool {
	for _, l := range leases {
		if l.Name == serverObjectName(ps) {
			return l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" && leaseExpiry(l).After(now)
		}
	}
	return false
}
