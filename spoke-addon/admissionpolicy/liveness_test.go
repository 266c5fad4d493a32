package admissionpolicy

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func lease(name, holder string, renewed time.Time, seconds int32) coordinationv1.Lease {
	l := coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}
	l.Spec.HolderIdentity = &holder
	rt := metav1.NewMicroTime(renewed)
	l.Spec.RenewTime = &rt
	l.Spec.LeaseDurationSeconds = &seconds
	return l
}

func TestLiveReplicas_CurrentLeasesOfThisServerOnly(t *testing.T) {
	leases := []coordinationv1.Lease{
		lease("regent-policy-server-default-replica-0", "0", now.Add(-5*time.Second), 15),
		lease("regent-policy-server-default-replica-1", "1", now.Add(-20*time.Second), 15), // expired
		lease("regent-policy-server-default-replica-2", "2", now.Add(-1*time.Second), 15),
		lease("regent-policy-server-other-replica-3", "3", now, 15),  // another server
		lease("regent-policy-server-default", "leader-pod", now, 15), // the leader Lease
	}
	live, next := liveReplicas("default", leases, now)
	if len(live) != 2 || !live[0] || !live[2] {
		t.Errorf("live = %v, want replicas 0 and 2", live)
	}
	if want := now.Add(10 * time.Second); !next.Equal(want) {
		t.Errorf("next expiry = %v, want %v (replica 0's)", next, want)
	}
}

func TestPolicyServerOfLease(t *testing.T) {
	for name, want := range map[string]string{
		"regent-policy-server-default-replica-0":     "default",
		"regent-policy-server-a-replica-b-replica-1": "a-replica-b",
		"regent-policy-server-default":               "",
		"kube-scheduler":                             "",
	} {
		got, ok := policyServerOfLease(name)
		if got != want || ok != (want != "") {
			t.Errorf("policyServerOfLease(%q) = %q, %v; want %q", name, got, ok, want)
		}
	}
}
