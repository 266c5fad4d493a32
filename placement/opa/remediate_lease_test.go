package opa

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"regent.dev/regent/fleet/fleettest"
)

// Two hub replicas: only the Lease holder remediates; when it stops, the other takes over.
func TestRemediatorLease_OneReplicaRemediatesAndTheOtherTakesOver(t *testing.T) {
	d, r, p := leaseDuration, renewDeadline, retryPeriod
	t.Cleanup(func() { leaseDuration, renewDeadline, retryPeriod = d, r, p })
	leaseDuration, renewDeadline, retryPeriod = 2*time.Second, time.Second, 200*time.Millisecond
	h := fleettest.Hub(t)
	kube, err := kubernetes.NewForConfig(h.Config)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "regent-system"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	running := map[string]bool{}
	stop := map[string]context.CancelFunc{}
	for _, id := range []string{"a", "b"} {
		rctx, rcancel := context.WithCancel(ctx)
		stop[id] = rcancel
		go leadRemediation(rctx, leaseLock(kube, "regent-system", id), func(ctx context.Context) {
			mu.Lock()
			running[id] = true
			mu.Unlock()
			<-ctx.Done()
			mu.Lock()
			delete(running, id)
			mu.Unlock()
		})
	}
	holder := func() string {
		l, err := kube.CoordinationV1().Leases("regent-system").Get(ctx, RemediatorLease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	only := func(id string) (bool, string) {
		mu.Lock()
		defer mu.Unlock()
		return len(running) == 1 && running[id] && holder() == id, fmt.Sprintf("running %v, Lease held by %q, want only %q", running, holder(), id)
	}
	var leader string
	fleettest.Eventually(t, 30*time.Second, func() (bool, string) {
		leader = holder()
		return only(leader)
	})
	// several renewals later it is still the only one
	time.Sleep(3 * leaseDuration)
	if ok, why := only(leader); !ok {
		t.Fatal(why)
	}
	other := map[string]string{"a": "b", "b": "a"}[leader]
	stop[leader]()
	fleettest.Eventually(t, 30*time.Second, func() (bool, string) { return only(other) })
}
