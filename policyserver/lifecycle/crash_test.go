package lifecycle

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/lifecycle/pull"
)

// A module that crashes or OOM-kills whoever prepares it would kill every leader in turn: each
// attempt is recorded before it starts, and after the bound the revision is given up instead of
// prepared again. A leader that starts also removes what a killed one left half-built.
func TestLeader_RevisionThatKillsItsPreparer_IsGivenUpAfterTheBound(t *testing.T) {
	e := newEnv(t)
	const ps = "crashing"
	shared := e.policyServer(t, ps)
	private := filepath.Join(t.TempDir(), "private")
	// What a leader killed mid-build leaves: a staging directory in the shared cache and a pull
	// directory in its private one.
	staleStaging := filepath.Join(shared, "v1", ".sha256-"+strings.Repeat("a", 64)+"-123")
	stalePull := filepath.Join(private+"-leader", "pull-123")
	for _, d := range []string{staleStaging, stalePull} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "half"), []byte("half a file"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	killer := e.createRevision(t, ps, "killer", 1, regoSpec(writeFile(t, "killer.rego", regoSource(t, "killer"))))

	opts, err := Options{Config: e.config, Namespace: testNamespace, PolicyServer: ps, SharedCache: shared,
		Version: "v1", Server: policyserver.Options{CacheDir: private}, Pull: pull.Options{FileRoots: []string{os.TempDir()}}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const bound = 3 // the default
	killed := 0
	for range bound {
		pulled := make(chan struct{}, 1)
		l, err := newLeader(ctx, opts, e.client, e.client, func() { nudge(pulled) })
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		l.preparing = func(string) { killed++; close(done); runtime.Goexit() }
		go func() {
			for { // the first pass starts the pull, the one after it prepares
				_ = l.sync(ctx)
				<-pulled
			}
		}()
		<-done
		l.close()
	}
	if killed != bound {
		t.Fatalf("%d leaders were killed, want %d", killed, bound)
	}

	// The next leader, a whole replica, gives the revision up instead of preparing it, and serves
	// what else there is.
	good := e.createRevision(t, ps, "good", 1, regoSpec(writeFile(t, "good.rego", regoSource(t, "good"))))
	e.startReplica(t, Options{PolicyServer: ps, Replica: 0, SharedCache: shared, Version: "v1", Server: policyserver.Options{CacheDir: private}})
	rev := e.waitRevision(t, killer.Name, "given up", initializedWith(metav1.ConditionFalse, ReasonPreparationAbandoned))
	if c := cond(rev, kubewardenv1.ConditionInitialized); !strings.Contains(c.Message, "gave up after 3 attempts") {
		t.Errorf("condition %q does not say it gave up after 3 attempts", c.Message)
	}
	e.waitRevision(t, good.Name, "Ready", readyOn(0, ReasonLoaded))
	for _, d := range []string{staleStaging, stalePull} {
		if _, err := os.Stat(d); !os.IsNotExist(err) {
			t.Errorf("%s left by a killed leader is still there (%v)", d, err)
		}
	}
}
