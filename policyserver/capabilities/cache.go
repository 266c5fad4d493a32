package capabilities

import (
	"context"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	"k8s.io/utils/clock"
)

// maxCacheEntries bounds a cache: policies choose the keys (names, selectors, images), so a
// policy that asks for many distinct ones must not grow the server's memory without limit.
const maxCacheEntries = 4096

// loadTimeout bounds a load shared by several callers: it runs detached from any one caller's
// deadline, so one impatient request does not fail the others waiting for the same answer.
const loadTimeout = 30 * time.Second

// ttlCache keeps answers for a fixed time, and makes concurrent misses for the same key share
// one request: an admission burst for one namespace costs the apiserver one GET, not hundreds.
type ttlCache struct {
	ttl    time.Duration
	clock  clock.PassiveClock
	flight singleflight.Group

	mu      sync.Mutex
	entries map[string]cacheEntry
}

type cacheEntry struct {
	value   []byte
	expires time.Time
}

func newTTLCache(ttl time.Duration, c clock.PassiveClock) *ttlCache {
	return &ttlCache{ttl: ttl, clock: c, entries: map[string]cacheEntry{}}
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
	if len(c.entries) >= maxCacheEntries {
		for k, e := range c.entries {
			if !now.Before(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxCacheEntries {
			clear(c.entries)
		}
	}
	c.entries[key] = cacheEntry{value: value, expires: now.Add(c.ttl)}
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
