package lifecycle

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/lifecycle/cache"
	"regent.dev/regent/policyserver/lifecycle/signing"
)

// leader prepares revisions: pull, precompile into the shared cache, validate settings, sign,
// Initialized. Only the holder of the policy server's Lease runs it.
type leader struct {
	opts   Options
	reader client.Reader // the informer cache of this server's revisions
	api    client.Client
	// keyReader reads the signing key Secret as the leader's identity (Options.LeaderConfig).
	keyReader client.Reader
	status    statusWriter
	cache     cache.Cache
	// engine validates settings by loading the policy from privateDir, into which Open copies
	// the verified entry: the same path a replica takes.
	engine     *engine.Engine
	privateDir string
	log        logr.Logger
	sources    compiledSources
	pulls      *pulls
	// prepared remembers the revisions whose outcome this leader wrote, with the entry it built:
	// until the informer shows that outcome, a pass (which a pull ending may start at any time)
	// would otherwise prepare the revision again and GC would take its entry.
	prepared map[types.UID]string
	// keysChanged is set when the signing Secret appears or changes: revisions that failed to be
	// signed are retried at once instead of after RetryInterval.
	keysChanged atomic.Bool
	// leading is set while this process holds the leader Lease.
	leading atomic.Bool
	// republishFailed remembers when rebuilding a missing entry last failed, to wait
	// RetryInterval before the next try.
	republishFailed map[types.UID]time.Time

	// mu is held by a pass and by close: leader election runs the leading callback on a
	// goroutine of its own that can outlive Run, and a pass must never use a closed engine.
	mu     sync.Mutex
	closed bool

	// preparing, when set, is called with a revision's name just before it is prepared: tests
	// kill the leader there, as a module that crashes or OOM-kills its preparer would.
	preparing func(revision string)
}

// close waits for a pass and the pulls in progress (their context is already cancelled) and
// releases the engine.
func (l *leader) close() {
	l.mu.Lock()
	l.closed = true // no pass starts a pull from now on
	l.mu.Unlock()
	l.pulls.wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	_ = l.engine.Close(context.Background())
}

// sync prepares every enabled revision that needs it, then removes cache entries no enabled
// revision uses.
func (l *leader) sync(ctx context.Context) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed {
		return nil
	}
	var list kubewardenv1.PolicyRevisionList
	if err := l.reader.List(ctx, &list, client.InNamespace(l.opts.Namespace)); err != nil {
		return fmt.Errorf("list revisions: %w", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	keep, wanted, listed := map[string]bool{}, map[pullKey]bool{}, map[types.UID]bool{}
	var keys signingKeys
	retrySigning := l.keysChanged.Swap(false)
	for i := range list.Items {
		rev, err := decodeRevision(&list.Items[i])
		if err != nil {
			l.log.Error(err, "skipping revision")
			continue
		}
		if !rev.Spec.Enabled {
			continue
		}
		if rev.Status.CacheKey != "" {
			keep[rev.Status.CacheKey] = true
		}
		listed[rev.UID] = true
		if key, ok := l.prepared[rev.UID]; ok {
			if !reportedInitialization(rev, l.opts.verifiedWith()) || (key != "" && rev.Status.CacheKey != key) {
				// The informer has not shown the outcome this leader wrote yet: neither prepare
				// the revision again nor let GC take the entry just built for it. An entry built
				// is shown only by its key: a refusal of the same generation (a module retried
				// once signed) reads as an outcome too, and taking it for this one would start
				// the revision over and remove its entry before any replica loaded it.
				if key != "" {
					keep[key] = true
				}
				continue
			}
			delete(l.prepared, rev.UID)
		}
		if rev.group != nil {
			l.syncGroup(ctx, rev, wanted)
			continue
		}
		if !l.needsInit(rev, retrySigning) {
			if l.needsRepublish(rev) {
				k := pullKey{uid: rev.UID, module: rev.spec.Module}
				wanted[k] = true
				if pulled, ok := l.pulls.get(ctx, k); ok {
					if keys.err == nil && keys.signer == nil {
						keys = l.readKeys(ctx)
					}
					if key := l.republish(ctx, rev, keys, pulled); key != "" {
						keep[key] = true
					}
				}
			}
			continue
		}
		k := pullKey{uid: rev.UID, module: rev.spec.Module}
		wanted[k] = true
		pulled, ok := l.pulls.get(ctx, k)
		if !ok {
			continue // still pulling; the pull's end brings another pass
		}
		if keys.err == nil && keys.signer == nil {
			keys = l.readKeys(ctx)
		}
		key, reported := l.initialize(ctx, rev, func() (string, string, error) { return l.prepareRevision(ctx, rev, keys, pulled) },
			func(digest string) string {
				return fmt.Sprintf("module %s compiled, settings valid; no signed cache entry, every replica compiles it: %v "+
					"(run the leader as ServiceAccount %s, --leader-kubeconfig)", digest, keys.err, leaderServiceAccount(l.opts.PolicyServer))
			})
		if key != "" {
			keep[key] = true
		}
		if reported {
			l.prepared[rev.UID] = key
		}
	}
	l.pulls.keepOnly(wanted)
	for uid := range l.prepared {
		if !listed[uid] {
			delete(l.prepared, uid)
		}
	}
	for uid := range l.republishFailed {
		if !listed[uid] {
			delete(l.republishFailed, uid)
		}
	}
	removed, err := l.cache.GC(keep)
	if len(removed) > 0 {
		l.log.Info("removed cache entries no enabled revision uses", "entries", removed)
	}
	return err
}

// needsInit: not yet tried for this generation, or failed for a reason that may pass (a
// registry down, a Secret not yet issued) and not retried for RetryInterval.
func (l *leader) needsInit(rev revision, retrySigning bool) bool {
	c := findCondition(rev.Status.Conditions, kubewardenv1.PolicyCondition{Type: kubewardenv1.ConditionInitialized})
	if c == nil || c.PolicyGeneration != rev.Spec.PolicyGeneration || c.Status == metav1.ConditionUnknown {
		return true
	}
	if c.Status == metav1.ConditionTrue {
		if rev.Status.VerifiedSignatures != l.opts.verifiedWith() {
			// Initialized before this verificationConfig (or under another): verify it now.
			return true
		}
		if c.Reason == ReasonInitializedUnsigned {
			// Signed once the key can be read: a new process (with a leader identity) or a
			// reissued Secret sets retrySigning.
			return retrySigning
		}
		return rev.Status.CacheKey == ""
	}
	switch c.Reason {
	case ReasonSignError:
		return retrySigning || l.opts.Clock.Since(c.LastTransitionTime.Time) >= l.opts.RetryInterval
	case ReasonPullError, ReasonUntrustedModule:
		return l.opts.Clock.Since(c.LastTransitionTime.Time) >= l.opts.RetryInterval
	}
	return false // a bad module or bad settings stay bad: the policy needs a new generation
}

// reportedInitialization tells whether rev shows an outcome of preparing its generation.
func reportedInitialization(rev revision, verifiedWith string) bool {
	c := findCondition(rev.Status.Conditions, kubewardenv1.PolicyCondition{Type: kubewardenv1.ConditionInitialized})
	return c != nil && c.PolicyGeneration == rev.Spec.PolicyGeneration && c.Status != metav1.ConditionUnknown &&
		(c.Status != metav1.ConditionTrue || ((rev.Status.CacheKey != "" || c.Reason == ReasonInitializedUnsigned) &&
			rev.Status.VerifiedSignatures == verifiedWith))
}

type signingKeys struct {
	signer   *signing.Signer
	verifier *signing.Verifier
	err      error
	// keyForbidden: the leader's identity may not read the key (no leader identity given to
	// a replica's process); revisions are then validated unsigned and replicas compile them.
	keyForbidden bool
}

// readKeys reads the certificates as every replica does, and the private key through the
// leader's own identity: the key Secret is refused to replicas.
func (l *leader) readKeys(ctx context.Context) signingKeys {
	var pub, key corev1.Secret
	name := signing.SecretName(l.opts.PolicyServer)
	if err := l.api.Get(ctx, client.ObjectKey{Namespace: l.opts.Namespace, Name: name}, &pub); err != nil {
		return signingKeys{err: fmt.Errorf("read signing Secret %s: %w", name, err)}
	}
	keyName := signing.KeySecretName(l.opts.PolicyServer)
	if err := l.keyReader.Get(ctx, client.ObjectKey{Namespace: l.opts.Namespace, Name: keyName}, &key); err != nil {
		return signingKeys{err: fmt.Errorf("read signing key Secret %s as the leader's identity: %w", keyName, err), keyForbidden: apierrors.IsForbidden(err)}
	}
	signer, err := signing.NewSigner(key.Data)
	if err != nil {
		return signingKeys{err: fmt.Errorf("signing key Secret %s: %w", keyName, err)}
	}
	verifier, err := signing.NewVerifier(pub.Data, l.opts.Clock.Now())
	if err != nil {
		return signingKeys{err: fmt.Errorf("signing Secret %s: %w", name, err)}
	}
	return signingKeys{signer: signer, verifier: verifier}
}

// initialize prepares one revision and reports the outcome as its Initialized condition; it
// returns the cache key it built, if any, and whether an outcome was written.
// prepare does the work and unsigned says, from the module digest, why a revision prepared
// without error has no signed entry.
func (l *leader) initialize(ctx context.Context, rev revision, prepare func() (digest, key string, err error),
	unsigned func(digest string) string) (string, bool) {
	log := l.log.WithValues("revision", rev.Name, "policy", rev.key.Name, "generation", rev.key.Generation)
	gaveUp, err := l.beginAttempt(ctx, rev)
	if err != nil {
		// Unrecorded, an attempt that kills this leader would be made again by every leader.
		log.Error(err, "could not record the preparation attempt; not preparing the revision")
		return "", false
	}
	if gaveUp {
		log.Error(nil, "revision given up: its earlier preparations ended without an outcome")
		return "", true
	}
	if l.preparing != nil {
		l.preparing(rev.Name)
	}
	digest, key, err := prepare()
	// The leader loads a policy only to validate it, then closes it: what it copied or compiled
	// into its private directory has served, and the signed entry is where replicas load from.
	if n := newPrivateFiles(l.privateDir).sweep(); n > 0 {
		log.V(1).Info("cleared the leader's private files", "files", n)
	}
	if ctx.Err() != nil {
		// Leadership ended mid-preparation: the attempt ended without a crash and has no
		// outcome to report, so it must not count towards giving the revision up.
		l.endAttempt(rev, log)
		return "", false
	}
	cond := rev.condition(kubewardenv1.ConditionInitialized, true, ReasonInitialized,
		fmt.Sprintf("module %s compiled for %s, settings valid, cache entry %s signed", digest, l.cache.Version, key))
	if fp := l.opts.verifiedWith(); err == nil && fp != "" {
		cond.Message += fmt.Sprintf("; signatures verified against the verificationConfig (%s)", fp)
	}
	if err == nil && key == "" {
		cond = rev.condition(kubewardenv1.ConditionInitialized, true, ReasonInitializedUnsigned, unsigned(digest))
	}
	var se *stepError
	if errors.As(err, &se) {
		cond = rev.condition(kubewardenv1.ConditionInitialized, false, se.reason, se.Error())
		log.Error(err, "revision not initialized", "reason", se.reason)
	} else {
		log.Info("revision initialized", "moduleDigest", digest, "cacheKey", key)
	}
	werr := l.status.update(ctx, client.ObjectKeyFromObject(rev.PolicyRevision), func(r *kubewardenv1.PolicyRevision, now metav1.Time) bool {
		changed := r.Status.PreparationAttempts != 0
		r.Status.PreparationAttempts = 0 // the attempt has an outcome: it did not kill the leader
		if digest != "" && r.Status.ModuleDigest != digest {
			r.Status.ModuleDigest, changed = digest, true
		}
		if key != "" && r.Status.CacheKey != key {
			r.Status.CacheKey, changed = key, true
		}
		verified := ""
		if err == nil {
			verified = l.opts.verifiedWith()
		}
		if r.Status.VerifiedSignatures != verified {
			r.Status.VerifiedSignatures, changed = verified, true
		}
		var ch bool
		r.Status.Conditions, ch = setCondition(r.Status.Conditions, cond, now)
		return changed || ch
	})
	if werr != nil {
		log.Error(werr, "could not report the revision's initialization")
		if ctx.Err() != nil {
			// Leadership ended between the preparation and its report: the next leader prepares
			// it again, and this attempt, which did not kill anyone, must not count against it.
			l.endAttempt(rev, log)
		}
	}
	return key, werr == nil
}

// beginAttempt records on the revision, before anything of it is pulled or compiled, that the
// leader is about to prepare it; when as many attempts as the bound ended without an outcome, it
// gives the revision up instead (Initialized False, PreparationAbandoned) and says so.
func (l *leader) beginAttempt(ctx context.Context, rev revision) (gaveUp bool, err error) {
	bound := l.opts.MaxPreparationAttempts
	err = l.status.update(ctx, client.ObjectKeyFromObject(rev.PolicyRevision), func(r *kubewardenv1.PolicyRevision, now metav1.Time) bool {
		gaveUp = r.Status.PreparationAttempts >= bound
		if !gaveUp {
			r.Status.PreparationAttempts++
			return true
		}
		c := rev.condition(kubewardenv1.ConditionInitialized, false, ReasonPreparationAbandoned, fmt.Sprintf(
			"gave up after %d attempts: each ended without an outcome, so preparing this module crashes or exhausts "+
				"the memory of the policy server; it will not be tried again until the policy changes", r.Status.PreparationAttempts))
		var changed bool
		r.Status.Conditions, changed = setCondition(r.Status.Conditions, c, now)
		return changed
	})
	return gaveUp, err
}

// endAttempt clears the attempt of a preparation cut short by the leader losing its Lease,
// with a context of its own since the leader's is done.
func (l *leader) endAttempt(rev revision, log logr.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := l.status.update(ctx, client.ObjectKeyFromObject(rev.PolicyRevision), func(r *kubewardenv1.PolicyRevision, _ metav1.Time) bool {
		if r.Status.PreparationAttempts == 0 {
			return false
		}
		r.Status.PreparationAttempts--
		return true
	})
	if err != nil {
		log.Error(err, "could not clear the preparation attempt cut short by losing leadership")
	}
}

// clearStaging removes what a leader killed mid-preparation left behind: staging directories
// in the shared cache, and pull and compilation directories and files in its private one. Only the leader writes
// either, and this one has just started leading, so nothing there is in flight.
func (l *leader) clearStaging() {
	l.mu.Lock()
	defer l.mu.Unlock()
	removed, err := l.cache.RemoveStaging()
	if err != nil {
		l.log.Error(err, "could not remove every staging directory of the shared cache")
	}
	if len(removed) > 0 {
		l.log.Info("removed staging directories a previous leader left half-built", "directories", removed)
	}
	entries, _ := os.ReadDir(l.privateDir)
	for _, e := range entries {
		if e.IsDir() && (strings.HasPrefix(e.Name(), pullDirPrefix) || strings.HasPrefix(e.Name(), cache.StagingPrefix)) {
			_ = os.RemoveAll(filepath.Join(l.privateDir, e.Name()))
		}
	}
	newPrivateFiles(l.privateDir).sweep()
}

// prepareRevision returns the module digest and the cache key, as far as it got, and a
// *stepError naming the step that failed.
func (l *leader) prepareRevision(ctx context.Context, rev revision, keys signingKeys, pulled pullResult) (digest, key string, err error) {
	if pulled.err != nil {
		return "", "", pullError(pulled.err)
	}
	src, err := compileSource(ctx, rev, pulled.module, l.privateDir, &l.sources)
	if err != nil {
		return "", "", err
	}
	digest, key = src.ModuleDigest, cache.Key(src.Wasm)
	opened := cache.Opened{Wasm: src.Wasm, Manifest: cache.Manifest{ExecutionMode: src.ExecutionMode, Entrypoint: src.Entrypoint}}
	switch {
	case keys.keyForbidden:
		// No shared entry can be signed: validate the module as it is, and replicas compile it.
		key = ""
	case keys.err != nil:
		return digest, "", &stepError{ReasonSignError, keys.err}
	default:
		if opened, err = l.signedEntry(ctx, src, key, keys); err != nil {
			return digest, "", err
		}
	}
	spec := engine.Spec{Name: rev.key.Name, Module: opened.Wasm, ExecutionMode: engine.ExecutionMode(opened.Manifest.ExecutionMode),
		Entrypoint: opened.Manifest.Entrypoint, ContextAwareResources: policyserver.EngineResources(rev.contextAwareResources()),
		AllowNetworkBuiltins: rev.allowNetworkBuiltins()}
	if rev.spec.Settings != nil {
		spec.Settings = rev.spec.Settings.Raw
	}
	p, err := l.engine.Load(ctx, spec)
	if err != nil {
		reason := ReasonCompileError
		if errors.Is(err, engine.ErrInvalidSettings) {
			reason = ReasonInvalidSettings
		}
		return digest, key, &stepError{reason, err}
	}
	p.Close()
	return digest, key, nil
}

// signedEntry opens the verified entry for key, building and signing it first unless another
// revision built it for the same module.
func (l *leader) signedEntry(ctx context.Context, src cache.Source, key string, keys signingKeys) (cache.Opened, error) {
	if opened, err := l.cache.Open(key, keys.verifier, l.privateDir); err == nil {
		return opened, nil
	}
	if _, err := l.cache.Build(ctx, src, keys.signer, l.privateDir); err != nil {
		reason := ReasonSignError
		if errors.Is(err, cache.ErrCompile) {
			reason = ReasonCompileError
		}
		return cache.Opened{}, &stepError{reason, fmt.Errorf("module %s: %w", src.ModuleDigest, err)}
	}
	opened, err := l.cache.Open(key, keys.verifier, l.privateDir)
	if err != nil {
		return cache.Opened{}, &stepError{ReasonSignError, fmt.Errorf("entry just signed does not verify: %w", err)}
	}
	return opened, nil
}

// newLeader makes the leader; pulled is called whenever a pull ends, to ask for a pass.
func newLeader(ctx context.Context, opts Options, reader client.Reader, api client.Client, pulled func()) (*leader, error) {
	dir := opts.Server.CacheDir + "-leader"
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("leader cache: %w", err)
	}
	// The host is the replica's: a policy may look things up while it validates its settings.
	keyReader := client.Reader(api)
	if opts.LeaderConfig != nil {
		c, err := client.New(opts.LeaderConfig, client.Options{Scheme: api.Scheme()})
		if err != nil {
			return nil, fmt.Errorf("leader identity: %w", err)
		}
		keyReader = c
	}
	root, _ := opts.cacheRoot()
	e, err := engine.New(ctx, engine.Options{CacheDir: dir, MaxInstancesPerPolicy: 1, Logger: opts.Logger, Host: opts.Server.Host})
	if err != nil {
		return nil, fmt.Errorf("leader engine: %w", err)
	}
	return &leader{
		opts: opts, reader: reader, api: api, keyReader: keyReader, status: statusWriter{client: api, clock: opts.Clock},
		cache: cache.Cache{Root: root, Version: opts.Version}, engine: e, privateDir: dir,
		log: opts.Logger.WithName("leader"), pulls: newPulls(opts.Pull, pulled), prepared: map[types.UID]string{},
		republishFailed: map[types.UID]time.Time{},
	}, nil
}

// gcAsReplica removes the entries of this replica's own cache that keep (the keys of the
// enabled revisions) does not name, unless this process leads: then the leader's pass does it,
// knowing also the entries it just built that no revision shows yet.
func (l *leader) gcAsReplica(keep map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed || l.leading.Load() {
		return
	}
	for _, key := range l.prepared {
		keep[key] = true
	}
	removed, err := l.cache.GC(keep)
	if err != nil {
		l.log.Error(err, "could not remove every unused entry of this replica's cache")
	}
	if len(removed) > 0 {
		l.log.Info("removed cache entries no enabled revision uses", "entries", removed)
	}
}
