package lifecycle

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver/internal/guests"
	"regent.dev/regent/policyserver/lifecycle/cache"
	"regent.dev/regent/policyserver/lifecycle/internal/sources"
	"regent.dev/regent/policyserver/lifecycle/pull"
)

// TestLifecycle shares one apiserver between specifications; each uses its own policy server.
func TestLifecycle(t *testing.T) {
	e := newEnv(t)
	t.Run("LeaderInitializesFromEverySource_ReplicaServesAndReportsReady", func(t *testing.T) { testSources(t, e) })
	t.Run("BadModulesSettingsAndRegistries_AreConditionsNotCrashes", func(t *testing.T) { testFailures(t, e) })
	t.Run("ContextAwareRevision_ReadsTheClusterThroughTheReplicasConfig", func(t *testing.T) { testContextAware(t, e) })
	t.Run("SlowPull_DelaysNoOtherRevision", func(t *testing.T) { testSlowPull(t, e) })
	t.Run("EntrySwappedOnTheSharedVolume_IsRefused_PreviousGenerationServes", func(t *testing.T) { testSwappedEntry(t, e) })
}

// Someone who can write the shared volume replaces a published entry's module with another
// entry's, signature and all: a replica starting afterwards refuses the entry, says so, compiles
// the revision's own module itself, and serves the previous generation throughout.
func testSwappedEntry(t *testing.T, e *env) {
	const ps = "swapped"
	shared := e.policyServer(t, ps)
	r0 := e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1"})
	g1 := e.createRevision(t, ps, "p", 1, regoSpec(writeFile(t, "g1.rego", regoSource(t, "g1"))))
	g1 = e.waitRevision(t, g1.Name, "Ready", readyOn(0, ReasonLoaded))
	g2 := e.createRevision(t, ps, "p", 2, regoSpec(writeFile(t, "g2.rego", regoSource(t, "g2"))))
	g2 = e.waitRevision(t, g2.Name, "Ready", readyOn(0, ReasonLoaded))
	for _, f := range []string{cache.ModuleFile, cache.ModuleFile + ".sig"} {
		b, err := os.ReadFile(filepath.Join(shared, "v1", g1.Status.CacheKey, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(shared, "v1", g2.Status.CacheKey, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}

	r1 := e.startReplica(t, Options{PolicyServer: ps, Replica: 1, SharedCache: shared, Version: "v1"})
	e.waitRevision(t, g1.Name, "Ready on replica 1 from the cache", readyOn(1, ReasonLoaded))
	rev := e.waitRevision(t, g2.Name, "Ready on replica 1, compiled by itself", readyOn(1, ReasonCompiledPrivately))
	if c := report(rev, 1); !strings.Contains(c.Message, "cache entry refused") {
		t.Errorf("replica 1 does not say why it compiled: %q", c.Message)
	}
	for _, r := range []*replicaHandle{r0, r1} {
		if code, allowed := r.review(t, "/validate/clusterwide-p/1", "nginx:latest"); code != http.StatusOK || allowed {
			t.Errorf("generation 1 answered %d allowed=%v, want a denial", code, allowed)
		}
	}
	if code, allowed := r1.review(t, "/validate/clusterwide-p/2", "nginx:latest"); code != http.StatusOK || allowed {
		t.Errorf("generation 2 on replica 1 answered %d allowed=%v: it must run its own module, denying", code, allowed)
	}
}

// A module server that never answers holds back only its own revision: the leader prepares
// the others while it waits, and the slow one once its module arrives.
func testSlowPull(t *testing.T, e *env) {
	const ps = "slow-pull"
	shared := e.policyServer(t, ps)
	release, slowSource := make(chan struct{}), regoSource(t, "slow")
	slow := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
			_, _ = w.Write(slowSource)
		case <-r.Context().Done():
		}
	}))
	defer slow.Close()
	released := false
	defer func() {
		if !released {
			close(release)
		}
	}()
	cas := slow.Client().Transport.(*http.Transport).TLSClientConfig.RootCAs
	// A budget far longer than the test: only pulling concurrently lets the fast one through.
	e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1",
		Pull: pull.Options{CAs: cas, Timeout: time.Hour, FileRoots: []string{os.TempDir()}}})
	// Named so the slow one comes first in the leader's order.
	slowRev := e.createRevision(t, ps, "a-slow", 1, regoSpec(slow.URL+"/policy.rego"))
	fast := e.createRevision(t, ps, "b-fast", 1, regoSpec(writeFile(t, "fast.rego", regoSource(t, "fast"))))
	e.waitRevision(t, fast.Name, "Ready while the slow module is still pulling", readyOn(0, ReasonLoaded))
	var now kubewardenv1.PolicyRevision
	if err := e.client.Get(context.Background(), client.ObjectKeyFromObject(slowRev), &now); err != nil {
		t.Fatal(err)
	}
	if c := cond(&now, kubewardenv1.ConditionInitialized); c != nil && c.Status != metav1.ConditionUnknown {
		t.Fatalf("the slow revision has an outcome before its module arrived: %+v", c)
	}
	close(release)
	released = true
	e.waitRevision(t, slowRev.Name, "Ready once its module arrived", readyOn(0, ReasonLoaded))
}

func testSources(t *testing.T, e *env) {
	const ps = "sources"
	shared := e.policyServer(t, ps)
	web, reg := sources.NewHTTPS(t), sources.NewRegistry(t)
	r := e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1", Pull: pull.Options{CAs: web.CAs}})

	srcs := map[string][]byte{}
	for _, name := range []string{"file", "https", "registry"} {
		srcs[name] = regoSource(t, name)
	}
	modules := map[string]string{
		"file":     "file://" + writeFile(t, "policy.rego", srcs["file"]),
		"https":    web.Put(t, "policy.rego", srcs["https"]),
		"registry": reg.Push(t, "policies/latest:v1", srcs["registry"]),
	}
	// A registry artifact has no file name to tell Rego from wasm: say it.
	modules["registry"] = strings.Replace(modules["registry"], "policies/latest:v1", "policies/latest.rego:v1", 1)
	reg.Push(t, "policies/latest.rego:v1", srcs["registry"])

	for name, module := range modules {
		e.createRevision(t, ps, name, 1, regoSpec(module))
	}
	for name := range modules {
		rev := e.waitRevision(t, "clusterwide-"+name+"-g1", "Initialized", initializedWith(metav1.ConditionTrue, ReasonInitialized))
		if rev.Status.ModuleDigest != cache.Digest(srcs[name]) {
			t.Errorf("%s: moduleDigest %s, want the digest of the source %s", name, rev.Status.ModuleDigest, cache.Digest(srcs[name]))
		}
		if _, err := os.Stat(filepath.Join(shared, "v1", rev.Status.CacheKey, cache.ManifestFile+".sig")); err != nil {
			t.Errorf("%s: no signed entry at v1/%s: %v", name, rev.Status.CacheKey, err)
		}
		e.waitRevision(t, rev.Name, "Ready on replica 0", readyOn(0, ReasonLoaded))
		if code, allowed := r.review(t, "/validate/clusterwide-"+name+"/1", "nginx:latest"); code != http.StatusOK || allowed {
			t.Errorf("%s: a :latest image got %d allowed=%v, want a denial", name, code, allowed)
		}
		if code, allowed := r.review(t, "/validate/clusterwide-"+name+"/1", "nginx:1.27"); code != http.StatusOK || !allowed {
			t.Errorf("%s: a pinned image got %d allowed=%v", name, code, allowed)
		}
	}
	if code := r.readyz(t); code != http.StatusOK {
		t.Errorf("/readyz answered %d with every revision loaded", code)
	}
}

func testFailures(t *testing.T, e *env) {
	const ps = "failures"
	shared := e.policyServer(t, ps)
	r := e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1"})
	good := e.createRevision(t, ps, "good", 1, regoSpec(writeFile(t, "good.rego", regoSource(t, "good"))))

	labels, err := guests.Build("wapc-labels")
	if err != nil {
		t.Fatal(err)
	}
	badSettings := kubewardenv1.PolicySpec{Module: writeFile(t, "labels.wasm", labels),
		Settings: &runtime.RawExtension{Raw: []byte(`{"required":[]}`)}}
	for _, tc := range []struct {
		policy, reason, message string
		spec                    kubewardenv1.PolicySpec
	}{
		{"unreachable", ReasonPullError, "connection refused", kubewardenv1.PolicySpec{Module: "registry://127.0.0.1:1/policies/x:v1"}},
		{"not-wasm", ReasonCompileError, "", kubewardenv1.PolicySpec{Module: writeFile(t, "bad.wasm", []byte("\x00asm\x01\x00\x00\x00\xff\xff\xff"))}},
		{"bad-rego", ReasonCompileError, "rego", regoSpec(writeFile(t, "bad.rego", []byte("package policy\nmain := {")))},
		{"bad-settings", ReasonInvalidSettings, "settings.required must name at least one label", badSettings},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			rev := e.createRevision(t, ps, tc.policy, 1, tc.spec)
			rev = e.waitRevision(t, rev.Name, "Initialized="+tc.reason, initializedWith(metav1.ConditionFalse, tc.reason))
			if c := cond(rev, kubewardenv1.ConditionInitialized); !strings.Contains(c.Message, tc.message) {
				t.Errorf("message %q does not say %q", c.Message, tc.message)
			}
			if c := report(rev, 0); c != nil {
				t.Errorf("a revision that is not Initialized was loaded: %+v", c)
			}
		})
	}
	e.waitRevision(t, good.Name, "Ready", readyOn(0, ReasonLoaded))
	if code, _ := r.review(t, "/validate/clusterwide-good/1", "nginx:1.27"); code != http.StatusOK {
		t.Errorf("after every failure the good policy answered %d", code)
	}
	if code := r.readyz(t); code != http.StatusOK {
		t.Errorf("/readyz answered %d: revisions that never initialized must not hold readiness back", code)
	}
}
