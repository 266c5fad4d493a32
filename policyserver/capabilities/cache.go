package capabilities

import (
	"context"
	"slices"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"
)

// A cache is bounded in entries and in bytes: policies choose the keys (names, selectors,
// images), and one Kubernetes list can be megabytes, so a policy that asks for many distinct or
// large answers must not grow the server's memory without limit. Past a bound the answers kept
// longest go first; an answer larger than the byte bound is served and not kept.
const (
	maxCacheEntries = 4096
	maxCacheBytes   = 32 << 20
)

// loadTimeout bounds a load shared by several callers: it runs detached from any one caller's
// deadline, so one impatient request does not fail the others waiting for the same answer.
const loadTimeout = 30 * time.Second

// ttlCache keeps answers for a fixed time, and makes concurrent misses for the same key share
// one request: an admission burst for one namespace costs the apiserver one GET, not hundreds.
type ttlCache struct {
	ttl    time.Duration
	clock  clock.PassiveClock
	flight singleflight.Group
	// maxEntries and maxBytes are maxCacheEntries and maxCacheBytes but in tests.
	maxEntries int
	maxBytes   int64

	mu      sync.Mutex
	entries map[string]cacheEntry
	bytes   int64
	// order is the keys as they were put: with one ttl for all, the oldest put expires first. A
	// key put again has a record for each put; only the one that matches its entry counts.
	order []putRecord
}

type cacheEntry struct {
	value   []byte
	expires time.Time
}

type putRecord struct {
	key     string
	expires time.Time
}

// entryBytes is what an entry holds: its value, its key (twice: the map's and the order's) and
// the bookkeeping around them.
func entryBytes(key string, value []byte) int64 { return int64(len(value) + 2*len(key) + 96) }

func newTTLCache(ttl time.Duration, c clock.PassiveClock) *ttlCache {
	return &ttlCache{ttl: ttl, clock: c, maxEntries: maxCacheEntries, maxBytes: maxCacheBytes, entries: map[string]cacheEntry{}}
}

func (c *ttlCache) get(key string) ([]byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[key]
	if !ok || !c.clock.Now().Before(e.expires) {
		return nil, false
	}
	return e.value, true
}

func (c *ttlCache) put(key string, value []byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.clock.Now()
	if size := entryBytes(key, value); size <= c.maxBytes {
		expires := now.Add(c.ttl)
		// Replaced in place: a delete and an insert of the same key cost more than the put.
		if old, ok := c.entries[key]; ok {
			c.bytes -= entryBytes(key, old.value)
		}
		c.entries[key] = cacheEntry{value: value, expires: expires}
		c.bytes += size
		if n := len(c.order); n > 0 && c.order[n-1].key == key {
			// The same key again (Kubewarden's disable_cache puts on every call): its record is
			// the newest already, and moving its expiry keeps the order sorted.
			c.order[n-1].expires = expires
		} else {
			c.order = append(c.order, putRecord{key: key, expires: expires})
		}
	} else {
		c.drop(key)
	}
	// Expired answers go first, then the oldest until both bounds hold.
	for len(c.order) > 0 {
		first := c.order[0]
		e, current := c.entries[first.key]
		current = current && e.expires.Equal(first.expires)
		over := len(c.entries) > c.maxEntries || c.bytes > c.maxBytes
		if current && now.Before(first.expires) && !over {
			break
		}
		if current {
			c.drop(first.key)
		}
		c.order[0] = putRecord{}
		c.order = c.order[1:]
	}
	if len(c.order) > 2*len(c.entries)+64 {
		// Mostly records of keys put again (Kubewarden's disable_cache puts on every call):
		// keep one per entry.
		c.order = c.order[:0:0]
		for k, e := range c.entries {
			c.order = append(c.order, putRecord{key: k, expires: e.expires})
		}
		slices.SortFunc(c.order, func(a, b putRecord) int { return a.expires.Compare(b.expires) })
	}
}

// drop forgets key's entry; its put records stay until they reach the front of the order.
func (c *ttlCache) drop(key string) {
	if e, ok := c.entries[key]; ok {
		c.bytes -= entryBytes(key, e.value)
		delete(c.entries, key)
	}
}

// fetch answers from the cache, or loads once for every concurrent caller of key and keeps the
// answer; fresh skips the cache (Kubewarden's disable_cache) but refreshes it. Errors are not
// kept: the next caller tries again.
func (c *ttlCache) fetch(ctx context.Context, key string, fresh bool, load func(context.Context) ([]byte, error)) ([]byte, error) {
	if fresh {
		b, err := load(ctx)
		if err == nil {
			c.put(key, b)
		}
		return b, err
	}
	if b, ok := c.get(key); ok {
		return b, nil
	}
	ch := c.flight.DoChan(key, func() (any, error) {
		lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), loadTimeout)
		defer cancel()
		b, err := load(lctx)
		if err == nil {
			c.put(key, b)
		}
		return b, err
	})
	select {
	case r := <-ch:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.([]byte), nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}
