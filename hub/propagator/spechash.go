package propagator

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// specHashPrefix marks, in the generateName of the hub's cached copy of a replica, the hash of the
// spec the cache transform (TrimReplica) dropped. It is never written to the apiserver: the
// transform computes it from the spec as the apiserver returned it, so a replica edited on the hub
// has another hash and is put back. generateName rather than an annotation because the hub never
// reads a replica's generateName and an annotation map costs more than the templates it replaces.
const specHashPrefix = "regent.dev/spec-sha256:"

// SpecHash hashes a spec as the apiserver stores it: templates are raw JSON whose key order and
// spacing the apiserver may change, so the spec is hashed decoded and re-encoded (sorted keys,
// compact). 128 bits of SHA-256 behind specHashPrefix; "" when the spec cannot be encoded, which
// never matches a trimmed replica.
//
// The hub hashes every replica its watch delivers (150,000 on a large fleet), and nearly all of
// them carry one of a few specs: the canonical form is computed once per encoding, and an
// encoding seen before costs only its streaming into SHA-256 (canonicalHashes).
func SpecHash(spec *policyv1.PolicySpec) string {
	h := sha256.New()
	if json.NewEncoder(h).Encode(spec) != nil {
		return ""
	}
	var encoded [sha256.Size]byte
	h.Sum(encoded[:0])
	if hash, ok := canonicalHashes.get(encoded); ok {
		return hash
	}
	hash := canonicalSpecHash(spec)
	if hash != "" {
		canonicalHashes.put(encoded, hash)
	}
	return hash
}

func canonicalSpecHash(spec *policyv1.PolicySpec) string {
	raw, err := json.Marshal(spec)
	if err != nil {
		return ""
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if d.Decode(&v) != nil {
		return ""
	}
	canonical, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(canonical)
	return specHashPrefix + base64.RawURLEncoding.EncodeToString(sum[:16])
}

// canonicalHashes maps the SHA-256 of a spec's plain encoding to its SpecHash. Bounded like
// sharedMaps: past maxCanonicalHashes encodings (a hub whose roots churn) it starts over.
var canonicalHashes = &hashTable{m: map[[sha256.Size]byte]string{}}

const maxCanonicalHashes = 4096

type hashTable struct {
	mu sync.Mutex
	m  map[[sha256.Size]byte]string
}

func (t *hashTable) get(k [sha256.Size]byte) (string, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	v, ok := t.m[k]
	return v, ok
}

func (t *hashTable) put(k [sha256.Size]byte, v string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.m) >= maxCanonicalHashes {
		clear(t.m)
	}
	t.m[k] = v
}

// TrimReplica replaces, in a replica about to enter the hub's cache, the spec by its hash: the
// hub compares a replica's spec with the one it wants, and the templates are most of a replica's
// size. The remediation action stays: when a write telling a cluster to stop enforcing fails, the
// hub must know whether that cluster still enforces. Roots are left whole.
func TrimReplica(p *policyv1.Policy) {
	// The informer may hand an object it already transformed to the transform again (client-go
	// documents it for Replace): a second pass must not hash the emptied spec.
	if !isReplica(p) || strings.HasPrefix(p.GenerateName, specHashPrefix) {
		return
	}
	p.GenerateName = SpecHash(&p.Spec)
	if h, ok := templatedHash(p.Annotations); ok {
		p.GenerateName = h
	}
	p.Spec = policyv1.PolicySpec{RemediationAction: p.Spec.RemediationAction}
}

// specMatches says whether a replica carries the spec whose SpecHash (or, templated, whose
// unresolved hash) is hash: TrimReplica recorded the replica's own.
func specMatches(rep *CachedReplica, hash string) bool {
	return rep.specHash == hash
}
