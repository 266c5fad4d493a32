package lifecycle

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver/selfsigned"
)

// Replicas that share no folder: each keeps its own signed cache, filled from the leader over
// TLS and verified before it is kept.
func TestLifecycleTransfer(t *testing.T) {
	e := newEnv(t)
	t.Run("NoSharedFolder_ReplicasFetchFromTheLeader_ALateAndARestartedReplicaCatchUp", func(t *testing.T) { testTransfer(t, e) })
	t.Run("TamperedOrTruncatedTransfer_IsRefusedAndFetchedAgain_NeverKept", func(t *testing.T) { testTamperedTransfer(t, e) })
	t.Run("LeaderKilledMidRollout_TheNextLeaderRepublishesAndFinishes", func(t *testing.T) { testTransferFailover(t, e) })
	t.Run("ALeaderTheServingCADoesNotVouchFor_IsNotFetchedFrom_TheReplicaCompilesAndSaysWhy", func(t *testing.T) { testUnauthenticatedLeader(t, e) })
}

// ownRoots are one signed-cache folder per replica, none shared.
func ownRoots(t *testing.T, n int) []string {
	dir := t.TempDir()
	roots := make([]string, n)
	for i := range roots {
		roots[i] = filepath.Join(dir, fmt.Sprintf("replica-%d", i))
	}
	return roots
}

func hasEntry(root, key string) bool {
	_, err := os.Stat(filepath.Join(root, "v1", key, "entry.json"))
	return err == nil
}

func testTransfer(t *testing.T, e *env) {
	const ps = "transfer"
	e.policyServer(t, ps)
	roots := ownRoots(t, 4)
	replicas := make([]*replicaHandle, 4)
	for n := range 3 {
		replicas[n] = e.startReplica(t, Options{PolicyServer: ps, Replica: n, SignedCache: roots[n], Version: "v1"})
	}
	g1 := e.createRevision(t, ps, ps, 1, regoSpec(writeFile(t, "g1.rego", regoSource(t, "t1"))))
	for n := range int32(3) {
		e.waitRevision(t, g1.Name, fmt.Sprintf("Ready on replica %d from a signed entry", n), readyOn(n, ReasonLoaded))
	}

	// The next generation, with every replica up and a leader elected: the figure of a rollout.
	start := time.Now()
	g2 := e.createRevision(t, ps, ps, 2, regoSpec(writeFile(t, "g2.rego", regoSource(t, "t2"))))
	for n := range int32(3) {
		g2 = e.waitRevision(t, g2.Name, fmt.Sprintf("Ready on replica %d from a signed entry", n), readyOn(n, ReasonLoaded))
	}
	t.Logf("generation 2 served by 3 replicas without a shared folder %v after its revision was written", time.Since(start).Round(10*time.Millisecond))
	for n := range 3 {
		if !hasEntry(roots[n], g2.Status.CacheKey) {
			t.Errorf("replica %d serves generation 2 but its own cache has no entry %s", n, g2.Status.CacheKey)
		}
		if code, allowed := replicas[n].review(t, "/validate/clusterwide-"+ps+"/2", "nginx:latest"); code != http.StatusOK || allowed {
			t.Errorf("replica %d: %d allowed=%v", n, code, allowed)
		}
	}

	// A replica started later catches up from the leader.
	replicas[3] = e.startReplica(t, Options{PolicyServer: ps, Replica: 3, SignedCache: roots[3], Version: "v1"})
	for _, name := range []string{g1.Name, g2.Name} {
		e.waitRevision(t, name, "Ready on the late replica from a signed entry", readyOn(3, ReasonLoaded))
	}

	// A replica restarted on a new, empty volume (a rescheduled pod's emptyDir) fetches again.
	holder := e.leaseHolder(t, LeaderLeaseName(ps))
	k := 1
	if strings.HasPrefix(holder, "1_") {
		k = 2
	}
	replicas[k].kill(t)
	if err := os.RemoveAll(roots[k]); err != nil {
		t.Fatal(err)
	}
	clearReady(t, e, g2.Name)
	replicas[k] = e.startReplica(t, Options{PolicyServer: ps, Replica: k, SignedCache: roots[k], Version: "v1"})
	e.waitRevision(t, g2.Name, "Ready on the restarted replica from a signed entry", readyOn(int32(k), ReasonLoaded))
	if !hasEntry(roots[k], g2.Status.CacheKey) {
		t.Errorf("restarted replica %d has no entry %s", k, g2.Status.CacheKey)
	}

	// The same rollout with one shared folder, for comparison.
	const shared = "transfer-shared"
	folder := e.policyServer(t, shared)
	for n := range 3 {
		e.startReplica(t, Options{PolicyServer: shared, Replica: n, SharedCache: folder, Version: "v1"})
	}
	s1 := e.createRevision(t, shared, shared, 1, regoSpec(writeFile(t, "s1.rego", regoSource(t, "s1"))))
	for n := range int32(3) {
		e.waitRevision(t, s1.Name, "Ready", readyOn(n, ReasonLoaded))
	}
	start = time.Now()
	s2 := e.createRevision(t, shared, shared, 2, regoSpec(writeFile(t, "s2.rego", regoSource(t, "s2"))))
	for n := range int32(3) {
		e.waitRevision(t, s2.Name, "Ready", readyOn(n, ReasonLoaded))
	}
	t.Logf("generation 2 served by 3 replicas sharing one folder %v after its revision was written", time.Since(start).Round(10*time.Millisecond))
}

// transferTamperer is a transferTestHook that spoils some transfers of the entries it is told.
type transferTamperer struct {
	mu    sync.Mutex
	calls map[string]int
	spoil func(call int, body []byte) []byte
}

func (tt *transferTamperer) hook(key string, body []byte) []byte {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	tt.calls[key]++
	return tt.spoil(tt.calls[key], body)
}

func (tt *transferTamperer) count(key string) int {
	tt.mu.Lock()
	defer tt.mu.Unlock()
	return tt.calls[key]
}

// flipCompiledCode rewrites a transfer with a byte of its compiled code changed and every
// signature kept, as a network path could.
func flipCompiledCode(t *testing.T, body []byte) []byte {
	var out bytes.Buffer
	tr, tw := tar.NewReader(bytes.NewReader(body)), tar.NewWriter(&out)
	flipped := false
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Errorf("transfer is not a tar stream: %v", err)
			return body
		}
		b, _ := io.ReadAll(tr)
		if !flipped && strings.Contains(h.Name, "wazero-") && !strings.HasSuffix(h.Name, ".sig") {
			b[len(b)/2] ^= 0xff
			flipped = true
		}
		_ = tw.WriteHeader(h)
		_, _ = tw.Write(b)
	}
	_ = tw.Close()
	if !flipped {
		t.Error("no compiled code in the transfer")
	}
	return out.Bytes()
}

func testTamperedTransfer(t *testing.T, e *env) {
	const ps = "tampered"
	e.policyServer(t, ps)
	roots := ownRoots(t, 3)
	// Replica 0 starts alone so it leads: the others then fetch from it.
	e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SignedCache: roots[0], Version: "v1"})
	eventually(t, "replica 0 leads", func() bool { return strings.HasPrefix(e.leaseHolder(t, LeaderLeaseName(ps)), "0_") })
	for n := 1; n < 3; n++ {
		e.startReplica(t, Options{PolicyServer: ps, Replica: n, SignedCache: roots[n], Version: "v1"})
	}

	// The first transfer of the entry has a byte of compiled code changed, the second is cut
	// short; both are refused and fetched again, and every replica serves the signed entry.
	tt := &transferTamperer{calls: map[string]int{}, spoil: func(call int, body []byte) []byte {
		switch call {
		case 1:
			return flipCompiledCode(t, body)
		case 2:
			return body[:len(body)/2]
		}
		return body
	}}
	transferTestHook = tt.hook
	t.Cleanup(func() { transferTestHook = nil })
	g1 := e.createRevision(t, ps, ps, 1, regoSpec(writeFile(t, "g1.rego", regoSource(t, "x1"))))
	for n := range int32(3) {
		g1 = e.waitRevision(t, g1.Name, "Ready from the signed entry", readyOn(n, ReasonLoaded))
	}
	// Two replicas kept one transfer each, after the two refused ones.
	if got := tt.count(g1.Status.CacheKey); got != 4 {
		t.Errorf("%d transfers of the entry, want 2 refused and 2 kept", got)
	}

	// Every transfer spoiled: nothing of it is kept, and the replicas compile the module
	// themselves after refusing it transferAttempts times, saying why.
	tt.mu.Lock()
	tt.spoil = func(_ int, body []byte) []byte { return flipCompiledCode(t, body) }
	tt.mu.Unlock()
	g2 := e.createRevision(t, ps, ps, 2, regoSpec(writeFile(t, "g2.rego", regoSource(t, "x2"))))
	for n := int32(1); n < 3; n++ {
		rev := e.waitRevision(t, g2.Name, "Ready, compiled by the replica", readyOn(n, ReasonCompiledPrivately))
		if c := report(rev, n); !strings.Contains(c.Message, "signature invalid") {
			t.Errorf("replica %d's Ready does not say the transfer was refused: %q", n, c.Message)
		}
		if hasEntry(roots[n], rev.Status.CacheKey) {
			t.Errorf("replica %d kept a refused transfer", n)
		}
	}
	g2 = e.waitRevision(t, g2.Name, "read", func(*kubewardenv1.PolicyRevision) bool { return true })
	if got := tt.count(g2.Status.CacheKey); got != 2*transferAttempts {
		t.Errorf("%d transfers of the spoiled entry, want %d per replica", got, transferAttempts)
	}
}

func testTransferFailover(t *testing.T, e *env) {
	const ps = "handover"
	e.policyServer(t, ps)
	roots := ownRoots(t, 4)
	wait := Options{leaderWait: 2 * time.Minute} // the machine is shared: never fall back to compiling here
	opts := func(n int, keep bool) Options {
		o := wait
		o.PolicyServer, o.Replica, o.SignedCache, o.Version, o.keepLeaseOnStop = ps, n, roots[n], "v1", keep
		return o
	}
	a := e.startReplica(t, opts(0, true))
	eventually(t, "replica 0 leads", func() bool { return strings.HasPrefix(e.leaseHolder(t, LeaderLeaseName(ps)), "0_") })
	e.startReplica(t, opts(1, false))
	e.startReplica(t, opts(2, false))
	g1 := e.createRevision(t, ps, ps, 1, regoSpec(writeFile(t, "g1.rego", regoSource(t, "h1"))))
	for n := range int32(3) {
		g1 = e.waitRevision(t, g1.Name, "Ready", readyOn(n, ReasonLoaded))
	}
	// Replicas 1 and 2 lose generation 1's entry (they serve it from memory): whichever leads
	// next must build it again for a replica that comes later.
	for n := 1; n < 3; n++ {
		if err := os.RemoveAll(filepath.Join(roots[n], "v1", g1.Status.CacheKey)); err != nil {
			t.Fatal(err)
		}
	}

	// Mid-rollout: the leader dies, holding its Lease, as soon as generation 2 is signed.
	g2 := e.createRevision(t, ps, ps, 2, regoSpec(writeFile(t, "g2.rego", regoSource(t, "h2"))))
	e.waitRevision(t, g2.Name, "Initialized", initializedWith(metav1.ConditionTrue, ReasonInitialized))
	a.kill(t)
	for n := int32(1); n < 3; n++ {
		e.waitRevision(t, g2.Name, "Ready on a survivor from a signed entry", readyOn(n, ReasonLoaded))
	}
	var holder string
	eventually(t, "a survivor leads once the dead leader's Lease expires", func() bool {
		holder = e.leaseHolder(t, LeaderLeaseName(ps))
		return strings.HasPrefix(holder, "1_") || strings.HasPrefix(holder, "2_")
	})
	// A replica that comes after the handover gets both generations from the new leader.
	e.startReplica(t, opts(3, false))
	for _, name := range []string{g1.Name, g2.Name} {
		e.waitRevision(t, name, "Ready on the replica started after the handover, from a signed entry", readyOn(3, ReasonLoaded))
	}
	g1 = e.waitRevision(t, g1.Name, "read", func(*kubewardenv1.PolicyRevision) bool { return true })
	if !hasEntry(roots[3], g1.Status.CacheKey) || !hasEntry(roots[int(holder[0]-'0')], g1.Status.CacheKey) {
		t.Errorf("generation 1's entry %s is not in the new leader's and the late replica's caches", g1.Status.CacheKey)
	}
}

func TestAuthorizeTransfer_OnlyAFreshProofForTheEntryWithTheTokenPasses(t *testing.T) {
	token, now := []byte("token"), time.Unix(1_800_000_000, 0)
	proof := func(tok []byte, key string, at time.Time) string {
		return fmt.Sprintf("%s %d %s", transferScheme, at.Unix(), transferMAC(tok, "v1", key, at.Unix()))
	}
	if err := authorizeTransfer(proof(token, "k", now.Add(-time.Minute)), token, "v1", "k", now); err != nil {
		t.Fatalf("a good proof: %v", err)
	}
	for what, header := range map[string]string{
		"none":             "",
		"another token":    proof([]byte("other"), "k", now),
		"another entry":    proof(token, "other", now),
		"too old":          proof(token, "k", now.Add(-transferSkew-time.Second)),
		"from the future":  proof(token, "k", now.Add(transferSkew+time.Second)),
		"another scheme":   strings.Replace(proof(token, "k", now), transferScheme, "Bearer", 1),
		"the token itself": "Bearer token",
	} {
		if err := authorizeTransfer(header, token, "v1", "k", now); err == nil {
			t.Errorf("%s: authorized", what)
		}
	}
	if err := authorizeTransfer(proof(nil, "k", now), nil, "v1", "k", now); err == nil {
		t.Error("a Secret without a token authorizes anyone")
	}
}

// A replica authenticates the leader it fetches from: one whose certificate the replica's CA
// bundle did not issue (someone on the pod network standing in for it, or a CA rotated without
// the bundle) is not asked for entries; the replica compiles the module itself and its report
// says why. Replicas that trust the CA fetch as before.
func testUnauthenticatedLeader(t *testing.T, e *env) {
	const ps = "impostor"
	e.policyServer(t, ps)
	roots := ownRoots(t, 3)
	other, err := selfsigned.Write(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SignedCache: roots[0], Version: "v1"})
	eventually(t, "replica 0 leads", func() bool { return strings.HasPrefix(e.leaseHolder(t, LeaderLeaseName(ps)), "0_") })
	e.startReplica(t, Options{PolicyServer: ps, Replica: 1, SignedCache: roots[1], Version: "v1",
		PeerCAFile: writeFile(t, "other-ca.crt", other.CAPEM), PeerServerName: "127.0.0.1"})
	e.startReplica(t, Options{PolicyServer: ps, Replica: 2, SignedCache: roots[2], Version: "v1"})

	g1 := e.createRevision(t, ps, ps, 1, regoSpec(writeFile(t, "i1.rego", regoSource(t, "i1"))))
	g1 = e.waitRevision(t, g1.Name, "Ready on replica 2 from the leader", func(r *kubewardenv1.PolicyRevision) bool {
		rs := report(r, 2)
		return readyOn(2, ReasonLoaded)(r) && strings.Contains(rs.Message, "fetched from the leader")
	})
	g1 = e.waitRevision(t, g1.Name, "Ready on replica 1, compiled by itself", readyOn(1, ReasonCompiledLocally))
	if msg := report(g1, 1).Message; !strings.Contains(msg, "certificate") || !strings.Contains(msg, "compiled by this replica") {
		t.Errorf("replica 1 says %q; want the leader's certificate named as the reason it compiled", msg)
	}
	if hasEntry(roots[1], g1.Status.CacheKey) {
		t.Errorf("replica 1 kept entry %s from a leader it could not authenticate", g1.Status.CacheKey)
	}
}
