package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/lifecycle/cache"
	"regent.dev/regent/policyserver/lifecycle/signing"
	"regent.dev/regent/policyserver/registry"
)

// replica makes the server serve every enabled, Initialized revision of its policy server and
// reports, per revision, whether it does (its entry in status.replicas).
type replica struct {
	opts   Options
	number int32
	// identity is this process's identity in leader election, to tell itself from another leader.
	identity string
	server   *policyserver.Server
	reader   client.Reader
	api      client.Client
	status   statusWriter
	cache    cache.Cache
	// shared: the cache directory is every replica's (RWX), where the leader publishes;
	// otherwise it is this replica's own, filled from the leader (transfer.go).
	shared     bool
	privateDir string
	log        logr.Logger
	// leader is this process's leader half, which alone removes entries while it leads.
	leader         *leader
	transfers      *prometheus.CounterVec
	transferClient *http.Client

	mu     sync.Mutex
	loaded map[registry.Key]served
	failed map[types.UID]time.Time
	// waitingSince is, per revision, when a load first found no leader to fetch its entry
	// from; after Options.leaderWait the replica compiles the module itself.
	waitingSince map[types.UID]time.Time
	files        *privateFiles
	swept        bool

	// ready is set by each sync: after the first one every wanted revision has been tried, and
	// the replica is ready while every revision a webhook calls is loaded.
	ready     atomic.Bool
	readiness atomic.Value // readiness, for /readyz
}

// readiness is what /readyz says beyond its status code.
type readiness struct {
	// waiting are the serving revisions (the ones the webhooks call) not loaded: they make the
	// replica unready, since it would answer 404 for what the apiserver sends it.
	waiting []string
	// failing are newer (or not yet serving) revisions not loaded: each has a Ready=False
	// report saying why, and none of them holds readiness back while the generation the
	// webhook calls is served.
	failing []string
}

// served is what the replica reported for a loaded revision.
type served struct {
	uid    types.UID
	report kubewardenv1.ReplicaStatus
}

// sync loads what is wanted and not loaded, unloads what is loaded and no longer wanted, and
// re-reports conditions another writer may have lost.
func (r *replica) sync(ctx context.Context) error {
	var list kubewardenv1.PolicyRevisionList
	if err := r.reader.List(ctx, &list, client.InNamespace(r.opts.Namespace)); err != nil {
		return fmt.Errorf("list revisions: %w", err)
	}
	want := map[registry.Key]revision{}
	for i := range list.Items {
		rev, err := decodeRevision(&list.Items[i])
		if err != nil {
			r.log.Error(err, "skipping revision")
			continue
		}
		if rev.Spec.Enabled && rev.initialized() && rev.Status.VerifiedSignatures == r.opts.verifiedWith() {
			// A revision not verified against this replica's verificationConfig waits for the
			// leader to verify it: it is never served on trust.
			want[rev.key] = rev
		}
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for uid := range r.waitingSince {
		if !wantsUID(want, uid) {
			delete(r.waitingSince, uid)
		}
	}
	unloaded := false
	for k, s := range r.loaded {
		if rev, ok := want[k]; !ok || rev.UID != s.uid {
			r.server.UnloadRevision(k)
			delete(r.loaded, k)
			r.files.unloaded(k)
			unloaded = true
			r.log.Info("revision unloaded", "policy", k.Name, "generation", k.Generation)
		}
	}
	keys := make([]registry.Key, 0, len(want))
	for k := range want {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].Name != keys[j].Name {
			return keys[i].Name < keys[j].Name
		}
		return keys[i].Generation < keys[j].Generation
	})
	var verifier *signing.Verifier
	var verifierErr error
	for _, k := range keys {
		rev := want[k]
		if s, ok := r.loaded[k]; ok {
			if !replicaCurrent(rev.Status.Replicas, s.report) {
				if err := r.report(ctx, client.ObjectKeyFromObject(rev.PolicyRevision), s.report); err != nil {
					r.log.Error(err, "could not report Ready")
				}
			}
			continue
		}
		if at, ok := r.failed[rev.UID]; ok && r.opts.Clock.Since(at) < r.opts.RetryInterval {
			continue
		}
		if verifier == nil && verifierErr == nil {
			verifier, verifierErr = r.readVerifier(ctx)
		}
		r.load(ctx, rev, verifier, verifierErr)
	}
	if unloaded || !r.swept {
		// After loading, so what this sync loaded is kept; the first sync also clears what an
		// earlier process left that nothing loads now.
		if n := r.files.sweep(); n > 0 {
			r.log.Info("removed private cache files no loaded revision needs", "files", n)
		}
		r.swept = true
	}
	if !r.shared {
		// Entries no enabled revision uses leave this replica's own cache as they leave the
		// leader's; while this process leads, the leader's pass does it.
		keep := map[string]bool{}
		for i := range list.Items {
			if k := list.Items[i].Status.CacheKey; k != "" && list.Items[i].Spec.Enabled {
				keep[k] = true
			}
		}
		if r.leader != nil {
			r.leader.gcAsReplica(keep)
		} else if removed, err := r.cache.GC(keep); err != nil {
			r.log.Error(err, "could not remove every unused entry of this replica's cache")
		} else if len(removed) > 0 {
			r.log.Info("removed cache entries no enabled revision uses", "entries", removed)
		}
	}
	var waiting, failing []string
	for _, k := range keys {
		if _, ok := r.loaded[k]; ok {
			continue
		}
		if want[k].Labels[kubewardenv1.ServingLabel] == "true" {
			waiting = append(waiting, fmt.Sprintf("%s/%d", k.Name, k.Generation))
		} else {
			failing = append(failing, fmt.Sprintf("%s/%d", k.Name, k.Generation))
		}
	}
	r.readiness.Store(readiness{waiting: waiting, failing: failing})
	r.ready.Store(len(waiting) == 0)
	return nil
}

// report writes this replica's entry in the revision's status.replicas. A RoleLeader process
// loads revisions only for its background scan: it is no replica, and reports nothing.
func (r *replica) report(ctx context.Context, key client.ObjectKey, rs kubewardenv1.ReplicaStatus) error {
	if !r.opts.Role.servesReplica() {
		return nil
	}
	return r.status.setReplica(ctx, key, rs)
}

func (r *replica) readVerifier(ctx context.Context) (*signing.Verifier, error) {
	var s corev1.Secret
	name := signing.SecretName(r.opts.PolicyServer)
	if err := r.api.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("read signing Secret %s: %w", name, err)
	}
	return signing.NewVerifier(s.Data, r.opts.Clock.Now())
}

// load serves one revision: from the verified cache entry when there is one for this version,
// otherwise compiled here from the module's source. Whatever fails is a condition, never an
// exit.
func (r *replica) load(ctx context.Context, rev revision, verifier *signing.Verifier, verifierErr error) {
	log := r.log.WithValues("revision", rev.Name, "policy", rev.key.Name, "generation", rev.key.Generation)
	obj := client.ObjectKeyFromObject(rev.PolicyRevision)
	fail := func(reason string, err error) {
		log.Error(err, "revision not loaded; the generations already loaded keep serving", "reason", reason)
		r.failed[rev.UID] = r.opts.Clock.Now()
		rs := rev.replicaStatus(r.number, false, reason, err.Error())
		if werr := r.report(ctx, obj, rs); werr != nil {
			log.Error(werr, "could not report the failure")
		}
	}

	if rev.group != nil {
		if r.loadGroup(ctx, rev, fail) {
			r.servedNow(ctx, rev, log, ReasonCompiledLocally, "a policy group: its members compiled by this replica")
		}
		return
	}
	reason, message := ReasonLoaded, fmt.Sprintf("loaded from the signed cache entry %s/%s", r.cache.Version, rev.Status.CacheKey)
	var (
		wasm                   []byte
		executionMode, entrypt string
	)
	r.files.beginLoad()
	err := verifierErr
	var opened cache.Opened
	switch {
	case err == nil && rev.Status.CacheKey == "":
		// Initialized unsigned: the leader could not read the signing key.
		err = fmt.Errorf("%w: the leader published no signed entry", cache.ErrNotFound)
	case err == nil:
		var from string
		opened, from, err = r.open(ctx, rev, verifier)
		if from != "" {
			message = fmt.Sprintf("fetched from the leader at %s and verified; %s", from, message)
		}
	}
	switch {
	case err == nil:
		wasm, executionMode, entrypt = opened.Wasm, opened.Manifest.ExecutionMode, opened.Manifest.Entrypoint
	case errors.Is(err, errNoLeaderEntry) && r.waitForLeader(rev.UID):
		// The leader is changing, or still publishing: ask again after RetryInterval; only
		// after leaderWait does the replica compile the module itself. Unknown, not False: the
		// generation has not failed, and the policy must not say so.
		log.Info("signed entry not fetched yet; retrying", "reason", err.Error())
		r.failed[rev.UID] = r.opts.Clock.Now()
		rs := rev.replicaStatus(r.number, false, ReasonWaitingForLeader, err.Error())
		rs.Ready = metav1.ConditionUnknown
		if werr := r.report(ctx, obj, rs); werr != nil {
			log.Error(werr, "could not report the wait")
		}
		return
	case errors.Is(err, errNoLeaderEntry), errors.Is(err, cache.ErrNotFound):
		reason, message = ReasonCompiledLocally, fmt.Sprintf("%v; compiled by this replica", err)
	default:
		// Refused: say so at once, then recover by compiling privately.
		reason, message = ReasonCompiledPrivately, fmt.Sprintf("cache entry refused (%v); compiled by this replica", err)
		rs := rev.replicaStatus(r.number, false, ReasonSignatureInvalid, err.Error())
		if werr := r.report(ctx, obj, rs); werr != nil {
			log.Error(werr, "could not report the refused cache entry")
		}
		log.Error(err, "cache entry refused; compiling privately")
	}
	if wasm == nil {
		src, err := prepare(ctx, rev, r.opts.Pull, r.privateDir, nil)
		if err != nil {
			var se *stepError
			errors.As(err, &se)
			fail(se.reason, err)
			return
		}
		if rev.Status.ModuleDigest != "" && src.ModuleDigest != rev.Status.ModuleDigest {
			fail(ReasonPullError, fmt.Errorf("module %s is now %s, but the revision was initialized with %s", rev.spec.Module, src.ModuleDigest, rev.Status.ModuleDigest))
			return
		}
		wasm, executionMode, entrypt = src.Wasm, src.ExecutionMode, src.Entrypoint
	}
	modPath := filepath.Join(r.privateDir, "modules", cache.Key(wasm)+".wasm")
	if err := writeModule(modPath, wasm); err != nil {
		fail(ReasonLoadError, err)
		return
	}
	if err := r.server.LoadRevision(ctx, rev.key, rev.policyConfig(modPath, executionMode, entrypt)); err != nil {
		fail(ReasonLoadError, err)
		return
	}
	r.files.loaded(rev.key, wasm, modPath, opened)
	r.servedNow(ctx, rev, log, reason, message)
}

// servedNow records and reports that the replica serves rev.
func (r *replica) servedNow(ctx context.Context, rev revision, log logr.Logger, reason, message string) {
	delete(r.failed, rev.UID)
	delete(r.waitingSince, rev.UID)
	rs := rev.replicaStatus(r.number, true, reason, message)
	r.loaded[rev.key] = served{uid: rev.UID, report: rs}
	log.Info("revision loaded", "reason", reason)
	if err := r.report(ctx, client.ObjectKeyFromObject(rev.PolicyRevision), rs); err != nil {
		log.Error(err, "could not report Ready")
	}
}

func wantsUID(want map[registry.Key]revision, uid types.UID) bool {
	for _, rev := range want {
		if rev.UID == uid {
			return true
		}
	}
	return false
}

// waitForLeader tells whether a load of revision uid that found no leader to ask should wait
// for one rather than compile: for leaderWait since the first such load.
func (r *replica) waitForLeader(uid types.UID) bool {
	since, ok := r.waitingSince[uid]
	if !ok {
		r.waitingSince[uid] = r.opts.Clock.Now()
		return true
	}
	return r.opts.Clock.Since(since) < r.opts.leaderWait
}

// open opens the verified entry of rev. In a replica's own cache, an entry it lacks, or one
// that no longer verifies on its disk, is fetched from the leader first; from is then the
// leader's address, so the replica's report says where its entry came from.
func (r *replica) open(ctx context.Context, rev revision, verifier *signing.Verifier) (opened cache.Opened, from string, err error) {
	key := rev.Status.CacheKey
	opened, err = r.cache.Open(key, verifier, r.privateDir)
	if r.shared || err == nil || (!errors.Is(err, cache.ErrNotFound) && !errors.Is(err, cache.ErrSignatureInvalid)) {
		return opened, "", err
	}
	if errors.Is(err, cache.ErrSignatureInvalid) {
		r.log.Error(err, "cache entry on this replica's disk refused; fetching it again", "key", key)
		if rerr := r.cache.Remove(key); rerr != nil {
			return cache.Opened{}, "", fmt.Errorf("%w; and it could not be removed: %v", err, rerr)
		}
	}
	if from, err = r.fetch(ctx, key, verifier); err != nil {
		return cache.Opened{}, "", err
	}
	opened, err = r.cache.Open(key, verifier, r.privateDir)
	return opened, from, err
}

func writeModule(path string, wasm []byte) error {
	if _, err := os.Stat(path); err == nil {
		return nil // named by its digest: same name, same bytes
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, wasm, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// serveReady answers /readyz: ready once every enabled, Initialized revision has been tried
// and every one the webhooks call (labelled kubewarden.ServingLabel) is loaded. A revision no
// webhook calls never makes the replica unready, even while no generation of its policy serves:
// nothing sends it traffic, and the controller moves a webhook to it only once every live
// replica reports it Ready. Readiness failing for it would take the replica out of the Service
// for every other policy — with failurePolicy Fail, denying the cluster's writes.
func (r *replica) serveReady(w http.ResponseWriter, _ *http.Request) {
	st, _ := r.readiness.Load().(readiness)
	if !r.ready.Load() {
		if st.waiting == nil {
			http.Error(w, "revisions not read yet", http.StatusServiceUnavailable)
			return
		}
		http.Error(w, fmt.Sprintf("revisions the webhooks call are not loaded: %v", st.waiting), http.StatusServiceUnavailable)
		return
	}
	_, _ = io.WriteString(w, "ok\n")
	for _, k := range r.server.Loaded() {
		fmt.Fprintf(w, "%s/%d\n", k.Name, k.Generation)
	}
	for _, f := range st.failing {
		fmt.Fprintf(w, "not loaded (see its Ready condition): %s\n", f)
	}
}

func (r *replica) handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /readyz", r.serveReady)
	mux.HandleFunc("GET "+transferPathPrefix, r.serveEntry)
	mux.Handle("/", r.server.Handler())
	return mux
}
