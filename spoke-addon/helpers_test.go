package spokeaddon_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	spokeaddon "regent.dev/regent/spoke-addon"
)

func newClient(t *testing.T, cfg *rest.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// eventually is fleettest.Eventually: poll until the condition holds or fail saying why.
var eventually = fleettest.Eventually

// addonHubIdentity gives a cluster's addon the identity it has in production.
func addonHubIdentity(t *testing.T, hub *fleet.Cluster, clusterName string) *rest.Config {
	t.Helper()
	cfg, err := spokeaddon.IssueHubIdentity(context.Background(), hub.Config, clusterName, 3600)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// proxy forwards TCP connections to an apiserver and can cut them all and refuse new ones, to
// take the hub away from an addon and give it back on the same address.
type proxy struct {
	t      *testing.T
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	conns []net.Conn
}

func startProxy(t *testing.T, target *rest.Config) (*proxy, *rest.Config) {
	t.Helper()
	u, err := url.Parse(target.Host)
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{t: t, target: u.Host}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(p.cut)
	cfg := rest.CopyConfig(target)
	cfg.Host = "https://" + p.addr
	return p, cfg
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", p.target)
			if err != nil {
				in.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, in, out)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
}

// cut closes the listener and every connection: the hub is unreachable.
func (p *proxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// restore listens again on the same address.
func (p *proxy) restore() {
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port can take a moment to be free again
		if ln, err = net.Listen("tcp", p.addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		p.t.Fatalf("restore proxy on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

func toJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
