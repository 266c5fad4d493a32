package pull_test

import (
	"context"
	"encoding/binary"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"golang.org/x/net/dns/dnsmessage"

	"regent.dev/regent/policyserver/lifecycle/internal/sources"
	"regent.dev/regent/policyserver/lifecycle/pull"
)

// A name that resolves to a public address when checked and to loopback when dialled (DNS
// rebinding) never reaches loopback: the pull dials the addresses it checked. The process's
// resolver is pointed at a DNS server that answers each A query for the redirect's name with
// 192.0.2.1 (TEST-NET-1, public to the check) the first time and 127.0.0.1 after that.
func TestFetch_RedirectToARebindingName_NeverReachesLoopback(t *testing.T) {
	var reached atomic.Int32
	store := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		reached.Add(1)
		_, _ = w.Write(module)
	}))
	defer store.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(store.URL, "http://"))

	var answered atomic.Int32
	rebinding := func(name string, typ dnsmessage.Type) net.IP {
		if name != "rebind.example." || typ != dnsmessage.TypeA {
			return nil
		}
		if answered.Add(1) == 1 {
			return net.IPv4(192, 0, 2, 1)
		}
		return net.IPv4(127, 0, 0, 1)
	}
	preferGo, dial := net.DefaultResolver.PreferGo, net.DefaultResolver.Dial
	net.DefaultResolver.PreferGo = true
	net.DefaultResolver.Dial = func(ctx context.Context, _, _ string) (net.Conn, error) {
		client, server := net.Pipe()
		go serveDNS(t, server, rebinding)
		return client, nil
	}
	defer func() { net.DefaultResolver.PreferGo, net.DefaultResolver.Dial = preferGo, dial }()

	layer := static.NewLayer(module, pull.WasmLayerMediaType)
	digest, _ := layer.Digest()
	blobs := &redirectingBlobs{BlobHandler: registry.NewInMemoryBlobHandler(), digest: digest, to: "http://rebind.example:" + port + "/blob"}
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0)), registry.WithBlobHandler(blobs)))
	defer srv.Close()
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer})
	if err != nil {
		t.Fatal(err)
	}
	ref := (&sources.Registry{Host: strings.TrimPrefix(srv.URL, "http://")}).PushImage(t, "policies/rebinding:v1", img)

	m, err := pull.Fetch(context.Background(), ref, pull.Options{Timeout: 10 * time.Second})
	if err == nil {
		t.Fatalf("read %d bytes through a rebinding name", len(m.Bytes))
	}
	if reached.Load() != 0 {
		t.Fatalf("the loopback store was reached %d times through a name first resolved public (%v)", reached.Load(), err)
	}
	if answered.Load() == 0 {
		t.Fatalf("the redirect's name was never resolved through the test's DNS server: %v", err)
	}
	t.Logf("refused: %v (%d answers)", err, answered.Load())
}

// serveDNS answers one DNS-over-TCP query on conn: an A record from answer, or no record.
func serveDNS(t *testing.T, conn net.Conn, answer func(name string, typ dnsmessage.Type) net.IP) {
	defer conn.Close()
	var size [2]byte
	if _, err := io.ReadFull(conn, size[:]); err != nil {
		return
	}
	query := make([]byte, binary.BigEndian.Uint16(size[:]))
	if _, err := io.ReadFull(conn, query); err != nil {
		return
	}
	var msg dnsmessage.Message
	if err := msg.Unpack(query); err != nil || len(msg.Questions) != 1 {
		t.Errorf("DNS query: %v", err)
		return
	}
	q := msg.Questions[0]
	msg.Header.Response, msg.Header.Authoritative, msg.Header.RCode = true, true, dnsmessage.RCodeSuccess
	if ip := answer(q.Name.String(), q.Type); ip != nil {
		var a dnsmessage.AResource
		copy(a.A[:], ip.To4())
		msg.Answers = []dnsmessage.Resource{{Header: dnsmessage.ResourceHeader{Name: q.Name, Type: q.Type, Class: q.Class, TTL: 0}, Body: &a}}
	}
	out, err := msg.Pack()
	if err != nil {
		t.Errorf("DNS answer: %v", err)
		return
	}
	binary.BigEndian.PutUint16(size[:], uint16(len(out)))
	_, _ = conn.Write(append(size[:], out...))
}
