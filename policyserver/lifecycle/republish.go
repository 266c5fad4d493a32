package lifecycle

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver/lifecycle/cache"
)

// A leader serves the replicas that keep their own cache from its own (transfer.go). A new
// leader lacks the entries its predecessor built that it never fetched as a replica (it was
// down, or it compiled them itself), and an entry found tampered with on its disk is removed:
// so the leader builds and signs again every signed entry an enabled revision names that its
// cache lacks. This never touches the revision's conditions: the revision stays Initialized
// and served wherever it is loaded, whatever a rebuild does.

// needsRepublish: rev is Initialized with a signed entry this leader's cache lacks, and no
// rebuild of it failed within RetryInterval.
func (l *leader) needsRepublish(rev revision) bool {
	if !rev.initialized() || rev.Status.CacheKey == "" || l.cache.Has(rev.Status.CacheKey) {
		return false
	}
	at, failed := l.republishFailed[rev.UID]
	return !failed || l.opts.Clock.Since(at) >= l.opts.RetryInterval
}

// republish builds and signs rev's entry again from its module, and returns the key it is
// published under ("" when it failed). Compiling the same module gives the same wasm, so the
// key is the revision's; if a compiler made other bytes, the revision is pointed at the new
// key, and replicas that loaded the old one keep serving it.
func (l *leader) republish(ctx context.Context, rev revision, keys signingKeys, pulled pullResult) string {
	log := l.log.WithValues("revision", rev.Name, "cacheKey", rev.Status.CacheKey)
	key, err := l.rebuild(ctx, rev, keys, pulled)
	if n := newPrivateFiles(l.privateDir).sweep(); n > 0 {
		log.V(1).Info("cleared the leader's private files", "files", n)
	}
	if err != nil {
		if ctx.Err() == nil {
			l.republishFailed[rev.UID] = l.opts.Clock.Now()
			log.Error(err, "could not publish the revision's entry again; replicas lacking it compile the module themselves")
		}
		return ""
	}
	delete(l.republishFailed, rev.UID)
	return key
}

// rebuild compiles, signs and publishes rev's entry, pointing the revision at it if its key
// changed.
func (l *leader) rebuild(ctx context.Context, rev revision, keys signingKeys, pulled pullResult) (string, error) {
	if pulled.err != nil {
		return "", pulled.err
	}
	if keys.err != nil {
		return "", keys.err
	}
	src, err := compileSource(ctx, rev, pulled.module, l.privateDir, &l.sources)
	if err != nil {
		return "", err
	}
	if rev.Status.ModuleDigest != "" && src.ModuleDigest != rev.Status.ModuleDigest {
		return "", fmt.Errorf("module %s is now %s, but the revision was initialized with %s", rev.spec.Module, src.ModuleDigest, rev.Status.ModuleDigest)
	}
	key := cache.Key(src.Wasm)
	if _, err := l.signedEntry(ctx, src, key, keys); err != nil {
		return "", err
	}
	l.log.Info("published the revision's signed entry again", "revision", rev.Name, "cacheKey", key)
	if key == rev.Status.CacheKey {
		return key, nil
	}
	return key, l.status.update(ctx, client.ObjectKeyFromObject(rev.PolicyRevision), func(r *kubewardenv1.PolicyRevision, _ metav1.Time) bool {
		if r.Status.CacheKey == key {
			return false
		}
		r.Status.CacheKey = key
		return true
	})
}
