package lifecycle

import (
	"context"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver"
)

func TestLifecycleReplicas(t *testing.T) {
	e := newEnv(t)
	t.Run("KilledLeader_AnotherLeadsWithinTheLeaseAndCompletesPendingRevisions", func(t *testing.T) { testFailover(t, e) })
	t.Run("Replicas_ServeNBesideNMinus1_RecoverFromTampering_CompileForANewVersion_RestartFromRevisions", func(t *testing.T) { testReplicas(t, e) })
}

func (e *env) leaseHolder(t *testing.T, name string) string {
	var l coordinationv1.Lease
	if err := e.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: name}, &l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func testFailover(t *testing.T, e *env) {
	const ps = "failover"
	shared := e.policyServer(t, ps)
	replicas := map[string]*replicaHandle{}
	for _, n := range []int{0, 1} {
		replicas[string(rune('0'+n))] = e.startReplica(t, Options{PolicyServer: ps, Replica: n, SharedCache: shared, Version: "v1", keepLeaseOnStop: true})
	}
	e.createRevision(t, ps, "before", 1, regoSpec(writeFile(t, "before.rego", regoSource(t, "before"))))
	e.waitRevision(t, "clusterwide-before-g1", "Initialized", initializedWith(metav1.ConditionTrue, ReasonInitialized))

	holder := e.leaseHolder(t, LeaderLeaseName(ps))
	if holder == "" {
		t.Fatal("no leader Lease holder")
	}
	leader, survivor := holder[:1], map[string]string{"0": "1", "1": "0"}[holder[:1]]
	replicas[leader].kill(t) // keeps the Lease, as a crashed process would
	killed := time.Now()

	e.createRevision(t, ps, "after", 1, regoSpec(writeFile(t, "after.rego", regoSource(t, "after"))))
	e.waitRevision(t, "clusterwide-after-g1", "Initialized by the new leader", initializedWith(metav1.ConditionTrue, ReasonInitialized))
	if h := e.leaseHolder(t, LeaderLeaseName(ps)); !strings.HasPrefix(h, survivor+"_") {
		t.Fatalf("leader Lease held by %q, want replica %s", h, survivor)
	}
	t.Logf("replica %s took over %v after the leader was killed (lease 4s)", survivor, time.Since(killed).Round(100*time.Millisecond))
	n := int32(survivor[0] - '0')
	e.waitRevision(t, "clusterwide-after-g1", "Ready on the survivor", readyOn(n, ReasonLoaded))
	if h := e.leaseHolder(t, ReplicaLeaseName(ps, int(n))); h != survivor {
		t.Errorf("replica Lease holder %q, want %q", h, survivor)
	}
}

func testReplicas(t *testing.T, e *env) {
	const ps = "replicas"
	shared := e.policyServer(t, ps)
	private0 := filepath.Join(t.TempDir(), "private-0")
	r0 := e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1",
		Server: policyserver.Options{CacheDir: private0}})
	r1 := e.startReplica(t, Options{PolicyServer: ps, Replica: 1, SharedCache: shared, Version: "v1"})

	g1 := e.createRevision(t, ps, "latest", 1, regoSpec(writeFile(t, "g1.rego", regoSource(t, "g1"))))
	g2 := e.createRevision(t, ps, "latest", 2, regoSpec(writeFile(t, "g2.rego", regoSource(t, "g2"))))
	for _, name := range []string{g1.Name, g2.Name} {
		e.waitRevision(t, name, "Ready on replica 0", readyOn(0, ReasonLoaded))
		e.waitRevision(t, name, "Ready on replica 1", readyOn(1, ReasonLoaded))
	}
	for _, r := range []*replicaHandle{r0, r1} {
		for _, path := range []string{"/validate/clusterwide-latest/1", "/validate/clusterwide-latest/2"} {
			if code, allowed := r.review(t, path, "nginx:latest"); code != http.StatusOK || allowed {
				t.Errorf("%s %s: %d allowed=%v", r.url, path, code, allowed)
			}
		}
	}

	// Disabled: unloaded by every replica, and its cache entry collected.
	g1 = e.waitRevision(t, g1.Name, "read", func(*kubewardenv1.PolicyRevision) bool { return true })
	g1Entry := filepath.Join(shared, "v1", g1.Status.CacheKey)
	g1Private := privateCopies(t, g1Entry, private0)
	g2 = e.waitRevision(t, g2.Name, "read", func(*kubewardenv1.PolicyRevision) bool { return true })
	g2Private := privateCopies(t, filepath.Join(shared, "v1", g2.Status.CacheKey), private0)
	for _, f := range append(g1Private, g2Private...) {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("replica 0 serves generations 1 and 2 but its private copy %s is missing: %v", f, err)
		}
	}
	fleettest.Edit(t, e.client, g1, func(r *kubewardenv1.PolicyRevision) { r.Spec.Enabled = false })
	eventually(t, "generation 1 unloaded and its entry collected", func() bool {
		c0, _ := r0.review(t, "/validate/clusterwide-latest/1", "nginx:1")
		c1, _ := r1.review(t, "/validate/clusterwide-latest/1", "nginx:1")
		_, err := os.Stat(g1Entry)
		return c0 == http.StatusNotFound && c1 == http.StatusNotFound && os.IsNotExist(err)
	})
	// The replica's private copies of generation 1's module go too; generation 2's stay.
	eventually(t, "generation 1's private files removed from replica 0", func() bool {
		for _, f := range g1Private {
			if _, err := os.Stat(f); !os.IsNotExist(err) {
				return false
			}
		}
		return true
	})
	for _, f := range g2Private {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("generation 2 is still served but %s is gone: %v", f, err)
		}
	}

	// Tampered compiled code: replica 2 refuses it, says so, compiles privately and serves.
	g2 = e.waitRevision(t, g2.Name, "read", func(*kubewardenv1.PolicyRevision) bool { return true })
	tamper(t, filepath.Join(shared, "v1", g2.Status.CacheKey))
	r2 := e.startReplica(t, Options{PolicyServer: ps, Replica: 2, SharedCache: shared, Version: "v1"})
	rev := e.waitRevision(t, g2.Name, "Ready on replica 2", readyOn(2, ReasonCompiledPrivately))
	if c := report(rev, 2); !strings.Contains(c.Message, "signature invalid") {
		t.Errorf("replica 2's Ready does not say the entry was refused: %q", c.Message)
	}
	if code, allowed := r2.review(t, "/validate/clusterwide-latest/2", "nginx:latest"); code != http.StatusOK || allowed {
		t.Errorf("replica 2 after recovering: %d allowed=%v", code, allowed)
	}

	// A newer version finds no entry for itself and compiles.
	r3 := e.startReplica(t, Options{PolicyServer: ps, Replica: 3, SharedCache: shared, Version: "v2"})
	e.waitRevision(t, g2.Name, "Ready on replica 3", readyOn(3, ReasonCompiledLocally))
	if code, _ := r3.review(t, "/validate/clusterwide-latest/2", "nginx:1"); code != http.StatusOK {
		t.Errorf("replica 3 of version v2 answered %d", code)
	}

	// Restart everything with empty private caches: the replicas come back from revisions alone.
	for _, r := range []*replicaHandle{r0, r1, r2, r3} {
		r.kill(t)
	}
	// Stopped on purpose, each replica took its Lease with it, so the controller can prune its
	// conditions at once rather than when the Lease would have expired.
	for n := range 4 {
		if h := e.leaseHolder(t, ReplicaLeaseName(ps, n)); h != "" {
			t.Errorf("replica %d stopped but its Lease is still held by %q", n, h)
		}
	}
	clearReady(t, e, g2.Name)
	g3 := e.createRevision(t, ps, "latest", 3, regoSpec(writeFile(t, "g3.rego", regoSource(t, "g3"))))
	_ = g3
	n0 := e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1"})
	n1 := e.startReplica(t, Options{PolicyServer: ps, Replica: 1, SharedCache: shared, Version: "v1"})
	for _, name := range []string{g2.Name, "clusterwide-latest-g3"} {
		e.waitRevision(t, name, "Ready on restarted replica 0", readyOn(0, ""))
		e.waitRevision(t, name, "Ready on restarted replica 1", readyOn(1, ""))
	}
	for _, r := range []*replicaHandle{n0, n1} {
		eventually(t, "ready", func() bool { return r.readyz(t) == http.StatusOK })
		if code, _ := r.review(t, "/validate/clusterwide-latest/3", "nginx:1"); code != http.StatusOK {
			t.Errorf("restarted replica answered %d for generation 3", code)
		}
	}
}

// privateCopies lists the files a replica with private directory dir keeps for the module of a
// shared cache entry: the module itself and the entry's compiled code.
func privateCopies(t *testing.T, entry, dir string) []string {
	t.Helper()
	out := []string{filepath.Join(dir, "modules", filepath.Base(entry)+".wasm")}
	err := filepath.WalkDir(entry, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(p, "wazero-") || strings.HasSuffix(p, ".sig") {
			return err
		}
		rel, err := filepath.Rel(entry, p)
		out = append(out, filepath.Join(dir, rel))
		return err
	})
	if err != nil || len(out) < 2 {
		t.Fatalf("entry %s: %v, %d files", entry, err, len(out)-1)
	}
	return out
}

// tamper flips a byte in every compiled-code file of an entry.
func tamper(t *testing.T, entry string) {
	t.Helper()
	n := 0
	_ = filepath.WalkDir(entry, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.Contains(p, "wazero-") || strings.HasSuffix(p, ".sig") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		b[len(b)/2] ^= 0xff
		n++
		return os.WriteFile(p, b, 0o644)
	})
	if n == 0 {
		t.Fatalf("no compiled code in %s", entry)
	}
}

// clearReady removes every replica's report, as the controller prunes those of stopped replicas.
func clearReady(t *testing.T, e *env, name string) {
	t.Helper()
	w := statusWriter{client: e.client, clock: clockNow{}}
	err := w.update(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: name}, func(r *kubewardenv1.PolicyRevision, _ metav1.Time) bool {
		r.Status.Replicas = nil
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
}

type clockNow struct{}

func (clockNow) Now() time.Time                  { return time.Now() }
func (clockNow) Since(t time.Time) time.Duration { return time.Since(t) }

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("never %s", what)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
