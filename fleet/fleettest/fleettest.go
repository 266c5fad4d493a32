// Package fleettest starts a local fleet for a test and stops it when the test ends. A test that
// needs a real apiserver and cannot find the binaries fails with a message that says to run
// `make testbin`; it never skips.
package fleettest

import (
	"context"
	"os"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/fleet"
)

// Start starts a fleet with opts and registers its Stop with t.Cleanup.
func Start(t testing.TB, opts fleet.Options) *fleet.Fleet {
	t.Helper()
	if opts.Log == nil && testing.Verbose() {
		opts.Log = os.Stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	f, err := fleet.Start(ctx, opts)
	if err != nil {
		t.Fatalf("start fleet: %v", err)
	}
	t.Cleanup(func() {
		if err := f.Stop(); err != nil {
			t.Errorf("stop fleet: %v", err)
		}
	})
	return f
}

// Hub starts a hub alone: enough for anything that only talks to the hub's apiserver.
func Hub(t testing.TB) *fleet.Cluster {
	t.Helper()
	return Start(t, fleet.Options{}).Hub
}

// Eventually polls cond every 100ms until it holds; past timeout it fails the test with what cond
// last said was missing.
func Eventually(t testing.TB, timeout time.Duration, cond func() (ok bool, missing string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, missing := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s: %s", timeout, missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Runner is what StartManager runs: a controller-runtime manager, or anything started the same way.
type Runner interface{ Start(context.Context) error }

// StartManager runs m until the test ends, then stops it and fails the test if it returned an
// error.
func StartManager(t testing.TB, m Runner) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- m.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// Edit reads obj's latest version, applies mutate and updates it, retrying on conflict: the
// controllers under test write the same objects (status, annotations), so a read-modify-write that
// does not retry fails whenever one of them wins the race, as a user's kubectl edit would.
func Edit[T client.Object](t testing.TB, c client.Client, obj T, mutate func(T)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := retry.RetryOnConflict(wait.Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 2, Cap: time.Second}, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		mutate(obj)
		return c.Update(ctx, obj)
	})
	if err != nil {
		t.Fatalf("edit %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
}

// FreeAddr is fleet.FreeAddr for a test: a loopback host:port nothing listens on, outside the
// ports outgoing connections take.
func FreeAddr(tb testing.TB) string {
	tb.Helper()
	addr, err := fleet.FreeAddr()
	if err != nil {
		tb.Fatal(err)
	}
	return addr
}
