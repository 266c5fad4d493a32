package apiserverwait

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/client-go/rest"

	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

var hub *fleet.Cluster

func TestMain(m *testing.M) { fleettest.Main(m, &hub) }

// through returns hub's configuration dialled through lb, and lb's backend: the apiserver itself.
func through(t *testing.T) (*rest.Config, *fleet.LoadBalancer, string) {
	t.Helper()
	u, err := url.Parse(hub.Config.Host)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := fleet.NewLoadBalancer()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lb.Close() })
	cfg := rest.CopyConfig(hub.Config)
	cfg.Host = "https://" + lb.Addr()
	return cfg, lb, u.Host
}

// An apiserver that becomes reachable after a while: Reachable keeps asking, says why on the log,
// and returns once it answers.
func TestReachable_WaitsUntilTheApiserverAnswers(t *testing.T) {
	cfg, lb, backend := through(t)
	waited := make(chan string, 100)
	log := funcr.New(func(_, args string) {
		select {
		case waited <- args:
		default:
		}
	}, funcr.Options{})
	done := make(chan error, 1)
	go func() { done <- Reachable(context.Background(), cfg, "managed cluster", log) }()
	// Two refused attempts, seen on the log, before the route exists.
	for range 2 {
		select {
		case msg := <-waited:
			if !strings.Contains(msg, "waiting for the apiserver") || !strings.Contains(msg, "managed cluster") {
				t.Fatalf("log line %q does not say what it waits for", msg)
			}
		case err := <-done:
			t.Fatalf("Reachable returned %v while nothing answered", err)
		}
	}
	lb.SetBackends(backend)
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Reachable: %v", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Reachable still waits a minute after the apiserver became reachable")
	}
}

// A process told to stop while its apiserver is unreachable stops, and the error names the
// apiserver and the last failure.
func TestReachable_StopsWithTheContextAndSaysWhy(t *testing.T) {
	cfg, _, _ := through(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err := Reachable(ctx, cfg, "hub", logr.Discard())
	if err == nil {
		t.Fatal("Reachable returned nil with nothing behind the address")
	}
	if msg := err.Error(); !strings.Contains(msg, "hub apiserver") || !strings.Contains(msg, cfg.Host) || !strings.Contains(msg, "attempts") {
		t.Fatalf("error %q does not name the apiserver, its address and the attempts", msg)
	}
}

// An apiserver that answers with an error (credentials it refuses) is reachable: the caller's own
// requests report the refusal, waiting would only hide it.
func TestReachable_AnApiserverThatRefusesTheCredentialsAnswers(t *testing.T) {
	cfg := rest.AnonymousClientConfig(hub.Config)
	cfg.BearerToken = "not-a-token"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := Reachable(ctx, cfg, "hub", logr.Discard()); err != nil {
		t.Fatalf("Reachable: %v", err)
	}
}
