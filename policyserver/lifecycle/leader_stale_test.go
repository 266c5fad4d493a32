package lifecycle

import (
	"context"
	"os"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/lifecycle/internal/sources"
	"regent.dev/regent/policyserver/lifecycle/pull"
	"regent.dev/regent/policyserver/signatures/signaturestest"
)

// laggingRevisions lists PolicyRevisions as an informer that has not caught up would: from a
// snapshot, while one is set. Everything else reads the apiserver.
type laggingRevisions struct {
	client.Reader
	snapshot atomic.Pointer[kubewardenv1.PolicyRevisionList]
}

func (r *laggingRevisions) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if s := r.snapshot.Load(); s != nil {
		if l, ok := list.(*kubewardenv1.PolicyRevisionList); ok {
			s.DeepCopyInto(l)
			return nil
		}
	}
	return r.Reader.List(ctx, list, opts...)
}

// A revision refused once (its module not signed yet) and prepared on a retry: until the
// informer shows the new outcome it still shows the refusal, which is an outcome too. The leader
// must not take that for the one it wrote: it would try the revision again (starting a new pull)
// and, with no revision naming the entry it just built, GC would remove it, so every replica
// would find no entry for the key the status then shows and compile the module itself (seen in
// CI as CompiledLocally after "Ready once signed").
func TestLeader_AnInformerStillShowingAnEarlierRefusal_KeepsTheEntryJustBuilt(t *testing.T) {
	e := newEnv(t)
	const ps = "lagging"
	shared := e.policyServer(t, ps)
	reg := sources.NewRegistry(t)
	alice := signaturestest.NewKey(t)
	module, digest := pushRego(t, reg, "policies/late", "late")
	rev := e.createRevision(t, ps, "late", 1, regoSpec(module))

	opts, err := Options{Config: e.config, Namespace: testNamespace, PolicyServer: ps, SharedCache: shared,
		Version: "v1", Verification: trustAlice(t, alice), Server: policyserver.Options{CacheDir: t.TempDir()},
		Pull: pull.Options{FileRoots: []string{os.TempDir()}}}.withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	opts.RetryInterval = time.Nanosecond // a refusal is retried on the next pass
	reader := &laggingRevisions{Reader: e.client}
	pulled := make(chan struct{}, 1)
	ctx := context.Background()
	l, err := newLeader(ctx, opts, reader, e.client, func() { nudge(pulled) })
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.close)
	// pass runs the leader's passes until cond holds of the revision on the apiserver.
	pass := func(what string, cond func(*kubewardenv1.PolicyRevision) bool) *kubewardenv1.PolicyRevision {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			if err := l.sync(ctx); err != nil {
				t.Fatal(err)
			}
			var got kubewardenv1.PolicyRevision
			if err := e.client.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: rev.Name}, &got); err != nil {
				t.Fatal(err)
			}
			if cond(&got) {
				return &got
			}
			if time.Now().After(deadline) {
				t.Fatalf("never %s: %+v", what, got.Status)
			}
			select {
			case <-pulled:
			case <-time.After(100 * time.Millisecond):
			}
		}
	}

	pass("refused unsigned", initializedWith(metav1.ConditionFalse, ReasonUntrustedModule))
	var refused kubewardenv1.PolicyRevisionList
	if err := e.client.List(ctx, &refused, client.InNamespace(testNamespace)); err != nil {
		t.Fatal(err)
	}

	signaturestest.Sign(t, digest, alice, map[string]string{"env": "prod"})
	prepared := pass("initialized once signed", func(r *kubewardenv1.PolicyRevision) bool { return r.Status.CacheKey != "" })
	key := prepared.Status.CacheKey

	// The informer lags behind: it still shows the refusal for a few passes (each of which may
	// start and finish a pull).
	reader.snapshot.Store(&refused)
	for range 3 {
		if err := l.sync(ctx); err != nil {
			t.Fatal(err)
		}
		select {
		case <-pulled:
		case <-time.After(2 * time.Second):
		}
		if !l.cache.Has(key) {
			t.Fatalf("the entry %s the revision's status names was removed while the informer still showed the earlier refusal", key)
		}
	}
	reader.snapshot.Store(nil)
	if err := l.sync(ctx); err != nil {
		t.Fatal(err)
	}
	if !l.cache.Has(key) {
		t.Fatalf("the entry %s the revision's status names was removed once the informer caught up", key)
	}
}
