package lifecycle

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/policyserver/lifecycle/cache"
	"regent.dev/regent/policyserver/lifecycle/signing"
)

// Replicas that share no volume get the leader's signed cache entries from the leader itself,
// over the admission listener's TLS: GET /cache/v1/<version>/<key>. The leader sends only bytes
// it verified after reading them; the replica verifies them again in memory, with the
// certificates of the signing Secret, before anything of them reaches its disk, so a tampered
// or truncated transfer is refused, and fetched again, never served.
//
// A replica finds its leader through the API, not DNS: the leader Lease names the process that
// holds it, and that process's Lease (a replica's own, or LeaderAddressLeaseName for the leader
// workload) carries the address it serves on (its pod IP) and the cache version it builds. A request proves it comes from a replica with an HMAC of what it asks for
// and when, keyed with the transfer token of the signing Secret, which only the policy server's
// identities may read; the token itself never travels: integrity comes from the signatures,
// authorization from the token. With Options.PeerCAFile the replica also authenticates the
// leader's certificate (issued for the Service's names, not pod IPs: transfer_peer.go), so no one
// on the pod network can stand in for the leader and read what it serves.

// Annotations of a replica Lease.
const (
	// AddressAnnotation is the host:port a replica serves its admission listener, and its
	// cache entries, on.
	AddressAnnotation = "regent.dev/address"
	// CacheVersionAnnotation is the cache version (Options.Version) the replica builds and
	// serves entries for.
	CacheVersionAnnotation = "regent.dev/cache-version"
)

const (
	transferPathPrefix = "/cache/v1/"
	transferScheme     = "Regent-Transfer"
	// transferSkew bounds how old (or early) a request's timestamp may be: a recorded request
	// fetches again only the entry it named, and only this long.
	transferSkew = 5 * time.Minute
	// transferAttempts is how many times a replica fetches an entry whose transfer it refused
	// before it compiles the module itself.
	transferAttempts = 3
)

// errNoLeaderEntry: the leader cannot be asked now (none, unreachable, not serving the entry
// yet); the replica tries again later, then compiles for itself.
var errNoLeaderEntry = errors.New("no leader serves the entry")

// transferMAC is the proof of a request for <version>/<key> at unix time ts.
func transferMAC(token []byte, version, key string, ts int64) string {
	m := hmac.New(sha256.New, token)
	fmt.Fprintf(m, "%s/%s\n%d", version, key, ts)
	return hex.EncodeToString(m.Sum(nil))
}

// transferTestHook, when set, replaces the body a replica received: tests tamper with or cut a
// transfer there, as a network path could.
var transferTestHook func(key string, body []byte) []byte

// serveEntry answers a replica's fetch of a signed entry from this replica's cache.
func (r *replica) serveEntry(w http.ResponseWriter, req *http.Request) {
	version, key, ok := strings.Cut(strings.TrimPrefix(req.URL.Path, transferPathPrefix), "/")
	if !ok || version != r.cache.Version {
		http.Error(w, fmt.Sprintf("this replica serves cache version %s", r.cache.Version), http.StatusNotFound)
		return
	}
	secret, err := r.signingSecret(req.Context())
	if err != nil {
		http.Error(w, "signing Secret unavailable", http.StatusServiceUnavailable)
		return
	}
	if err := authorizeTransfer(req.Header.Get("Authorization"), secret.Data[signing.TransferTokenKey], version, key, r.opts.Clock.Now()); err != nil {
		r.log.Info("refused a cache entry request", "key", key, "from", req.RemoteAddr, "reason", err.Error())
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	v, err := signing.NewVerifier(secret.Data, r.opts.Clock.Now())
	if err != nil {
		http.Error(w, "signing Secret unusable", http.StatusServiceUnavailable)
		return
	}
	if !r.cache.Has(key) {
		http.Error(w, "no such entry here", http.StatusNotFound)
		return
	}
	// Into memory first: a failed verification must answer an error, not half a stream.
	var body bytes.Buffer
	if err := r.cache.WriteEntry(&body, key, v); err != nil {
		r.log.Error(err, "cache entry does not verify; not sending it", "key", key)
		if errors.Is(err, cache.ErrSignatureInvalid) {
			_ = r.cache.Remove(key) // the leader builds it again (republish)
		}
		http.Error(w, "entry does not verify here", http.StatusNotFound)
		return
	}
	w.Header().Set("Content-Type", "application/x-tar")
	_, _ = w.Write(body.Bytes())
}

func authorizeTransfer(header string, token []byte, version, key string, now time.Time) error {
	if len(token) == 0 {
		return errors.New("the signing Secret has no transfer token")
	}
	fields := strings.Fields(header)
	if len(fields) != 3 || fields[0] != transferScheme {
		return errors.New("no transfer proof")
	}
	ts, err := strconv.ParseInt(fields[1], 10, 64)
	if err != nil {
		return errors.New("malformed transfer proof")
	}
	if d := now.Sub(time.Unix(ts, 0)); d > transferSkew || d < -transferSkew {
		return errors.New("transfer proof out of date")
	}
	if !hmac.Equal([]byte(fields[2]), []byte(transferMAC(token, version, key, ts))) {
		return errors.New("wrong transfer proof")
	}
	return nil
}

// signingSecret is the Secret of certificates and transfer token, from the informer cache.
func (r *replica) signingSecret(ctx context.Context) (*corev1.Secret, error) {
	var s corev1.Secret
	name := signing.SecretName(r.opts.PolicyServer)
	if err := r.reader.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: name}, &s); err != nil {
		return nil, fmt.Errorf("read signing Secret %s: %w", name, err)
	}
	return &s, nil
}

// leaderAddress is where the current leader serves, if it is another process of this cache
// version with a current Lease. The leader Lease's holder identity starts with the name of the
// Lease carrying its address: a replica number (a RoleAll replica's own Lease), or
// leaderHolderName (the Lease a RoleLeader process renews while it leads, which must name the
// same holder: one a previous leader left says nothing of the current one).
func (r *replica) leaderAddress(ctx context.Context) (string, error) {
	var leader coordinationv1.Lease
	if err := r.api.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: LeaderLeaseName(r.opts.PolicyServer)}, &leader); err != nil {
		return "", fmt.Errorf("%w: leader Lease: %v", errNoLeaderEntry, err)
	}
	if !leaseCurrent(&leader, r.opts.Clock.Now()) {
		return "", fmt.Errorf("%w: no process holds the leader Lease", errNoLeaderEntry)
	}
	holder := *leader.Spec.HolderIdentity
	if holder == r.identity {
		return "", fmt.Errorf("%w: this process leads and is still publishing the entry", errNoLeaderEntry)
	}
	name, _, _ := strings.Cut(holder, "_")
	var leaseName string
	if name == leaderHolderName {
		leaseName = LeaderAddressLeaseName(r.opts.PolicyServer)
	} else if number, err := strconv.Atoi(name); err == nil {
		leaseName = ReplicaLeaseName(r.opts.PolicyServer, number)
	} else {
		return "", fmt.Errorf("%w: leader identity %q names no replica", errNoLeaderEntry, holder)
	}
	var rl coordinationv1.Lease
	if err := r.api.Get(ctx, client.ObjectKey{Namespace: r.opts.Namespace, Name: leaseName}, &rl); err != nil {
		return "", fmt.Errorf("%w: Lease %s of the leader: %v", errNoLeaderEntry, leaseName, err)
	}
	if name == leaderHolderName && (rl.Spec.HolderIdentity == nil || *rl.Spec.HolderIdentity != holder) {
		return "", fmt.Errorf("%w: leader %s has not published its address on Lease %s yet", errNoLeaderEntry, holder, leaseName)
	}
	if v := rl.Annotations[CacheVersionAnnotation]; v != r.cache.Version {
		// Another build leads (an upgrade in progress): it has no entry of this version, ever.
		return "", fmt.Errorf("%w: the leader builds cache version %q, this replica runs %s", cache.ErrNotFound, v, r.cache.Version)
	}
	addr := rl.Annotations[AddressAnnotation]
	if addr == "" {
		return "", fmt.Errorf("%w: leader %s advertises no address (--advertise-address)", cache.ErrNotFound, holder)
	}
	return addr, nil
}

func leaseCurrent(l *coordinationv1.Lease, now time.Time) bool {
	s := l.Spec
	if s.HolderIdentity == nil || *s.HolderIdentity == "" || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return false
	}
	return now.Before(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second))
}

// fetch gets the entry for key from the leader into this replica's cache. A transfer refused
// (tampered, truncated) is fetched again, up to transferAttempts times; the error of the last
// one wraps cache.ErrSignatureInvalid or cache.ErrTransfer. errNoLeaderEntry means: later.
// It returns the leader's address the entry came from.
func (r *replica) fetch(ctx context.Context, key string, v *signing.Verifier) (string, error) {
	addr, err := r.leaderAddress(ctx)
	if err != nil {
		return "", err
	}
	secret, err := r.signingSecret(ctx)
	if err != nil {
		return "", fmt.Errorf("%w: %v", errNoLeaderEntry, err)
	}
	token := secret.Data[signing.TransferTokenKey]
	if len(token) == 0 {
		return "", fmt.Errorf("%w: the signing Secret has no %s to ask the leader with", cache.ErrNotFound, signing.TransferTokenKey)
	}
	for attempt := 1; ; attempt++ {
		err = r.fetchOnce(ctx, addr, key, token, v)
		if err == nil {
			r.transfers.WithLabelValues("verified").Inc()
			r.log.Info("cache entry fetched from the leader", "key", key, "leader", addr)
			return addr, nil
		}
		if !errors.Is(err, cache.ErrSignatureInvalid) && !errors.Is(err, cache.ErrTransfer) {
			r.transfers.WithLabelValues("failed").Inc()
			return "", err
		}
		r.transfers.WithLabelValues("refused").Inc()
		r.log.Error(err, "cache entry transfer refused", "key", key, "leader", addr, "attempt", attempt)
		if attempt == transferAttempts || ctx.Err() != nil {
			return "", err
		}
	}
}

func (r *replica) fetchOnce(ctx context.Context, addr, key string, token []byte, v *signing.Verifier) error {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Pull.Timeout)
	defer cancel()
	url := "https://" + addr + transferPathPrefix + r.cache.Version + "/" + key
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	ts := r.opts.Clock.Now().Unix()
	req.Header.Set("Authorization", fmt.Sprintf("%s %d %s", transferScheme, ts, transferMAC(token, r.cache.Version, key, ts)))
	resp, err := r.transferClient.Do(req)
	if err != nil {
		return fmt.Errorf("%w: %v", errNoLeaderEntry, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%w: %s answered %s: %s", errNoLeaderEntry, addr, resp.Status, strings.TrimSpace(string(msg)))
	}
	var body io.Reader = resp.Body
	if transferTestHook != nil {
		b, err := io.ReadAll(io.LimitReader(resp.Body, r.maxEntryBytes()+1))
		if err != nil {
			return fmt.Errorf("%w: %v", cache.ErrTransfer, err)
		}
		body = strings.NewReader(string(transferTestHook(key, b)))
	}
	return r.cache.Receive(key, body, v, r.maxEntryBytes())
}

// maxEntryBytes bounds a received entry: the module, its compiled code (a few times the module)
// and the signatures.
func (r *replica) maxEntryBytes() int64 { return 8 * r.opts.Pull.MaxBytes }
