package propagator_test

import (
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub"
)

// connections records which local address each hub request to the apiserver went out on.
type connections struct {
	mu    sync.Mutex
	local map[string]map[string]bool // request kind -> local addresses
}

func (c *connections) wrap(next http.RoundTripper) http.RoundTripper {
	return roundTripper(func(req *http.Request) (*http.Response, error) {
		kind := requestKind(req)
		trace := &httptrace.ClientTrace{GotConn: func(info httptrace.GotConnInfo) {
			c.mu.Lock()
			defer c.mu.Unlock()
			if c.local[kind] == nil {
				c.local[kind] = map[string]bool{}
			}
			c.local[kind][info.Conn.LocalAddr().String()] = true
		}}
		return next.RoundTrip(req.WithContext(httptrace.WithClientTrace(req.Context(), trace)))
	})
}

// requestKind names the hub's requests this test tells apart.
func requestKind(req *http.Request) string {
	q := req.URL.Query()
	switch {
	case req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/policies"):
		return "replica create"
	case q.Get("watch") == "true" && strings.HasSuffix(req.URL.Path, "/policies") && strings.HasPrefix(q.Get("labelSelector"), "!"):
		return "root watch"
	case q.Get("watch") == "true" && strings.HasSuffix(req.URL.Path, "/policies"):
		return "replica watch"
	}
	return "other"
}

func (c *connections) of(kind string) map[string]bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]bool{}
	for a := range c.local[kind] {
		out[a] = true
	}
	return out
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// The hub's caches watch on connections of their own: on the HTTP/2 connection of its writes,
// the apiserver ended the replica watch as unresponsive every fraction of a second while the hub
// created replicas, until the watch fell out of the apiserver's window of events and relisted.
func TestHub_CachesWatchOnConnectionsApartFromTheWrites(t *testing.T) {
	e := newEnv(t)
	conns := &connections{local: map[string]map[string]bool{}}
	cfg := rest.CopyConfig(hubCluster.Config)
	cfg.Wrap(conns.wrap)
	c1, c2 := e.cluster("c1", nil), e.cluster("c2", nil)
	e.rootPolicy("p", policyv1.Inform, nil)
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", c1, c2)
	e.startHubOn(cfg, hub.Options{})
	e.eventually("both replicas", func() (bool, string) {
		got := e.replicas("p")
		return got[c1] != nil && got[c2] != nil, fmt.Sprintf("%d replicas", len(got))
	})

	creates, replicaWatch, rootWatch := conns.of("replica create"), conns.of("replica watch"), conns.of("root watch")
	if len(creates) == 0 || len(replicaWatch) == 0 || len(rootWatch) == 0 {
		t.Fatalf("requests seen: creates on %v, replica watch on %v, root watch on %v", creates, replicaWatch, rootWatch)
	}
	for a := range replicaWatch {
		if creates[a] || rootWatch[a] {
			t.Errorf("the replica watch shares connection %s: creates on %v, root watch on %v", a, creates, rootWatch)
		}
	}
	for a := range rootWatch {
		if creates[a] {
			t.Errorf("the root watch shares connection %s with the replica creates", a)
		}
	}
}
