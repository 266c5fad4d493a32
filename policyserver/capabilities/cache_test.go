package capabilities

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func smallCache(entries int, maxBytes int64) (*ttlCache, *clocktesting.FakeClock) {
	clk := clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0))
	c := newTTLCache(time.Minute, clk)
	c.maxEntries, c.maxBytes = entries, maxBytes
	return c, clk
}

// Answers of a kilobyte each under a bound of ten: the newest stay, the oldest go, and the
// bytes the cache counts are those of the answers it holds.
func TestTTLCache_BoundedInBytes_TheOldestAnswersGoFirst(t *testing.T) {
	c, clk := smallCache(1000, 10<<10)
	for i := range 30 {
		c.put(fmt.Sprint("pods/", i), bytes.Repeat([]byte{'x'}, 1<<10))
		clk.Step(time.Second)
	}
	if c.bytes > c.maxBytes {
		t.Fatalf("holds %d bytes, bound %d", c.bytes, c.maxBytes)
	}
	var held int64
	for k, e := range c.entries {
		held += entryBytes(k, e.value)
	}
	if held != c.bytes {
		t.Fatalf("counts %d bytes, holds %d", c.bytes, held)
	}
	if _, ok := c.get("pods/29"); !ok {
		t.Fatal("the newest answer is gone")
	}
	if _, ok := c.get("pods/0"); ok {
		t.Fatal("the oldest answer is still there")
	}
	if n := len(c.entries); n < 8 || n > 9 {
		t.Fatalf("%d answers of 1 KiB kept under 10 KiB", n)
	}
}

// A list larger than the whole bound is answered every time and never kept: it would push out
// every other answer.
func TestTTLCache_AnAnswerLargerThanTheBound_IsServedNotKept(t *testing.T) {
	c, _ := smallCache(1000, 10<<10)
	c.put("small", []byte("kept"))
	loads := 0
	huge := func(context.Context) ([]byte, error) { loads++; return make([]byte, 64<<10), nil }
	for range 2 {
		b, err := c.fetch(context.Background(), "pods", false, huge)
		if err != nil || len(b) != 64<<10 {
			t.Fatalf("fetch: %d bytes, %v", len(b), err)
		}
	}
	if loads != 2 {
		t.Fatalf("loaded %d times; a value over the bound must not be kept", loads)
	}
	if _, ok := c.get("small"); !ok {
		t.Fatal("a large answer pushed out a small one it was not kept in place of")
	}
}

// Kubewarden's disable_cache loads and puts the same key on every call: the cache keeps one
// entry for it, counted once, and its record of puts stays small.
func TestTTLCache_OneKeyPutOnEveryCall_IsCountedOnce(t *testing.T) {
	c, clk := smallCache(1000, 10<<10)
	for i := range 10_000 {
		c.put("namespaces/default", []byte(fmt.Sprint(i)))
		clk.Step(time.Millisecond)
	}
	if len(c.entries) != 1 || c.bytes != entryBytes("namespaces/default", []byte("9999")) {
		t.Fatalf("%d entries, %d bytes", len(c.entries), c.bytes)
	}
	if b, ok := c.get("namespaces/default"); !ok || string(b) != "9999" {
		t.Fatalf("get: %q, %t", b, ok)
	}
	if len(c.order) > 2*len(c.entries)+64 {
		t.Fatalf("%d put records for %d entries", len(c.order), len(c.entries))
	}
}

// The entry bound holds as before, and answers past their time go before live ones.
func TestTTLCache_BoundedInEntries_ExpiredAnswersGoFirst(t *testing.T) {
	c, clk := smallCache(3, 1<<20)
	c.put("a", []byte("a"))
	clk.Step(2 * time.Minute) // a has expired
	for _, k := range []string{"b", "c", "d"} {
		c.put(k, []byte(k))
	}
	if _, ok := c.entries["a"]; ok {
		t.Fatal("an expired answer outlived live ones")
	}
	for _, k := range []string{"b", "c", "d"} {
		if _, ok := c.get(k); !ok {
			t.Fatalf("%s is gone with room for three", k)
		}
	}
	c.put("e", []byte("e"))
	if _, ok := c.get("b"); ok || len(c.entries) != 3 {
		t.Fatalf("%d entries; the oldest (b) should have gone", len(c.entries))
	}
}

// BenchmarkTTLCache_Put is a host call with Kubewarden's disable_cache (a put of one key on every
// call) and a miss that fills the cache (a new key each time, past the entry bound).
func BenchmarkTTLCache_Put(b *testing.B) {
	value := bytes.Repeat([]byte{'x'}, 512)
	b.Run("same_key", func(b *testing.B) {
		c := newTTLCache(time.Minute, clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)))
		for b.Loop() {
			c.put("namespaces/shop", value)
		}
	})
	b.Run("new_keys", func(b *testing.B) {
		c := newTTLCache(time.Minute, clocktesting.NewFakeClock(time.Unix(1_700_000_000, 0)))
		i := 0
		for b.Loop() {
			c.put(fmt.Sprint("pods/", i), value)
			i++
		}
	})
}
