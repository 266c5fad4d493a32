package lifecycle

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver/lifecycle/cache"
)

func TestParseRole(t *testing.T) {
	for in, want := range map[string]Role{"": RoleAll, "all": RoleAll, "replica": RoleReplica, "leader": RoleLeader} {
		if got, err := ParseRole(in); err != nil || got != want {
			t.Errorf("ParseRole(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseRole("both"); err == nil {
		t.Error(`ParseRole("both") accepted`)
	}
}

// The topology of a cluster: replicas that never campaign, and a leader process of its own that
// builds, signs and serves the entries they fetch, serving no admission itself.
func TestLifecycleRoles(t *testing.T) {
	e := newEnv(t)
	const ps = "roles"
	e.policyServer(t, ps)
	roots := ownRoots(t, 2)
	replica := e.startReplica(t, Options{PolicyServer: ps, Role: RoleReplica, Replica: 1, SignedCache: roots[1], Version: "v1"})
	g1 := e.createRevision(t, ps, ps, 1, regoSpec(writeFile(t, "g1.rego", regoSource(t, "r1"))))

	t.Run("AReplicaNeverTakesTheLeaderLease", func(t *testing.T) {
		e.waitLease(t, ReplicaLeaseName(ps, 1))
		if code := replica.readyz(t); code != http.StatusOK {
			t.Fatalf("replica /readyz %d before any revision is Initialized", code)
		}
		// The replica has synced and renews its Lease; with no leader process, no one holds the
		// leader Lease and the revision is not Initialized: a replica never prepares one.
		if err := e.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: LeaderLeaseName(ps)}, &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
			t.Errorf("leader Lease with only a replica running: %v, want NotFound", err)
		}
		rev := &kubewardenv1.PolicyRevision{}
		if err := e.client.Get(context.Background(), client.ObjectKeyFromObject(g1), rev); err != nil {
			t.Fatal(err)
		}
		if c := cond(rev, kubewardenv1.ConditionInitialized); c != nil {
			t.Errorf("revision Initialized by a replica: %+v", c)
		}
	})

	leader := e.startReplica(t, Options{PolicyServer: ps, Role: RoleLeader, SignedCache: roots[0], Version: "v1"})
	t.Run("TheLeaderBuildsSignsAndServesTheEntryTheReplicaFetches", func(t *testing.T) {
		e.waitRevision(t, g1.Name, "Initialized by the leader process", initializedWith("True", ReasonInitialized))
		rev := e.waitRevision(t, g1.Name, "Ready on the replica from the leader's entry", readyOn(1, ReasonLoaded))
		rs := report(rev, 1)
		if !strings.Contains(rs.Message, "fetched from the leader") {
			t.Errorf("replica 1's report %q does not say the entry came from the leader", rs.Message)
		}
		if len(rev.Status.Replicas) != 1 {
			t.Errorf("status.replicas %+v: the leader process reported as a replica", rev.Status.Replicas)
		}
		if !hasEntry(roots[1], rev.Status.CacheKey) || !hasEntry(roots[0], rev.Status.CacheKey) {
			t.Errorf("entry %s missing from the leader's or the replica's own cache", rev.Status.CacheKey)
		}
		holder := e.leaseHolder(t, LeaderLeaseName(ps))
		if !strings.HasPrefix(holder, leaderHolderName+"_") {
			t.Errorf("leader Lease held by %q, want the leader process", holder)
		}
		addr := &coordinationv1.Lease{}
		if err := e.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: LeaderAddressLeaseName(ps)}, addr); err != nil {
			t.Fatal(err)
		}
		if addr.Spec.HolderIdentity == nil || *addr.Spec.HolderIdentity != holder || addr.Annotations[AddressAnnotation] == "" {
			t.Errorf("leader address Lease %+v %v, want held by %s with an address", addr.Spec, addr.Annotations, holder)
		}
		// The leader process is no replica: no replica Lease (its Replica is the default 0).
		if err := e.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: ReplicaLeaseName(ps, 0)}, &coordinationv1.Lease{}); !apierrors.IsNotFound(err) {
			t.Errorf("replica Lease 0 with only the leader process as 0: %v, want NotFound", err)
		}
		if code, allowed := replica.review(t, "/validate/clusterwide-"+ps+"/1", "nginx:latest"); code != http.StatusOK || allowed {
			t.Errorf("replica: %d allowed=%v, want the policy's refusal", code, allowed)
		}
		if code, _ := leader.review(t, "/validate/clusterwide-"+ps+"/1", "nginx:latest"); code != http.StatusNotFound {
			t.Errorf("leader process answered admission with %d, want 404: it serves none", code)
		}
		if code := leader.readyz(t); code != http.StatusOK {
			t.Errorf("leader /readyz %d", code)
		}
	})

	t.Run("LeaderDown_TheReplicaKeepsServing_ANewRevisionWaitsForTheNextLeader", func(t *testing.T) {
		leader.kill(t)
		g2 := e.createRevision(t, ps, ps, 2, regoSpec(writeFile(t, "g2.rego", regoSource(t, "r2"))))
		if code, allowed := replica.review(t, "/validate/clusterwide-"+ps+"/1", "nginx:latest"); code != http.StatusOK || allowed {
			t.Errorf("replica without a leader: %d allowed=%v, want generation 1 still refusing", code, allowed)
		}
		// The released leader Lease is held by no one, and the replica does not take it.
		e.waitRevision(t, g1.Name, "still Ready on the replica", readyOn(1, ReasonLoaded))
		if holder := e.leaseHolder(t, LeaderLeaseName(ps)); holder != "" {
			t.Errorf("leader Lease held by %q after the leader process stopped", holder)
		}
		rev := &kubewardenv1.PolicyRevision{}
		if err := e.client.Get(context.Background(), client.ObjectKeyFromObject(g2), rev); err != nil {
			t.Fatal(err)
		}
		if c := cond(rev, kubewardenv1.ConditionInitialized); c != nil || len(rev.Status.Replicas) > 0 {
			t.Errorf("generation 2 without a leader: Initialized %+v, replicas %+v; want it waiting", c, rev.Status.Replicas)
		}
		leader = e.startReplica(t, Options{PolicyServer: ps, Role: RoleLeader, SignedCache: roots[0], Version: "v1"})
		e.waitRevision(t, g2.Name, "Ready on the replica once a leader is back", readyOn(1, ReasonLoaded))
	})
}

// waitLease waits until Lease name exists.
func (e *env) waitLease(t *testing.T, name string) {
	t.Helper()
	eventually(t, "Lease "+name, func() bool {
		return e.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: name}, &coordinationv1.Lease{}) == nil
	})
}

// A replica trusts the leader workload's address only while its Lease names the holder of the
// leader Lease: one a stopped leader left behind says nothing of where the next one serves.
func TestLeaderAddress_TheAddressLeaseMustNameTheCurrentLeader(t *testing.T) {
	e := newEnv(t)
	const ps = "address"
	ctx := context.Background()
	now := metav1.NewMicroTime(time.Now())
	seconds := int32(3600)
	lease := func(name, holder string, annotations map[string]string) {
		l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: name, Annotations: annotations},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &now}}
		if err := e.client.Create(ctx, l); apierrors.IsAlreadyExists(err) {
			old := &coordinationv1.Lease{}
			if err := e.client.Get(ctx, client.ObjectKeyFromObject(l), old); err != nil {
				t.Fatal(err)
			}
			l.ResourceVersion = old.ResourceVersion
			err = e.client.Update(ctx, l)
			if err != nil {
				t.Fatal(err)
			}
		} else if err != nil {
			t.Fatal(err)
		}
	}
	r := &replica{opts: Options{Namespace: testNamespace, PolicyServer: ps, Replica: 1, Clock: clock.RealClock{}},
		api: e.client, identity: "1_self", cache: cache.Cache{Version: "v1"}}
	address := map[string]string{AddressAnnotation: "10.0.0.9:8443", CacheVersionAnnotation: "v1"}
	lease(LeaderLeaseName(ps), "leader_new", nil)
	lease(LeaderAddressLeaseName(ps), "leader_old", address)
	if addr, err := r.leaderAddress(ctx); !errors.Is(err, errNoLeaderEntry) {
		t.Errorf("address Lease of the previous leader: %q, %v; want errNoLeaderEntry", addr, err)
	}
	lease(LeaderAddressLeaseName(ps), "leader_new", address)
	if addr, err := r.leaderAddress(ctx); err != nil || addr != "10.0.0.9:8443" {
		t.Errorf("address Lease of the current leader: %q, %v", addr, err)
	}
	lease(LeaderLeaseName(ps), "1_self", nil)
	if _, err := r.leaderAddress(ctx); !errors.Is(err, errNoLeaderEntry) {
		t.Errorf("this process leads: %v, want errNoLeaderEntry", err)
	}
}
