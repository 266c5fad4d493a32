package pull

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"time"
)

// ErrRedirectRefused: a pull was redirected where it may not go.
var ErrRedirectRefused = errors.New("redirect refused")

// redirectGuard is the transport of every pull that may leave the host the policy named: an
// https:// module's redirects, and what go-containerregistry reaches besides the registry (blob
// downloads and token endpoints it is pointed to; it follows redirects with a client of its own,
// so the transport is the one place that sees them all). The policy's own host is reached as
// named; any other never through plain http from https, and, unless the operator allows it,
// never at a loopback, private, link-local or unspecified address (cloud metadata, the cluster's
// own services).
//
// The address is checked where the connection is made, on the addresses dialled, and nowhere
// else: a name checked once and resolved again at the dial could answer a public address to the
// check and a private one to the dial (DNS rebinding).
type redirectGuard struct {
	origin *url.URL
	opts   Options
	// isNamed tells the requests that go where the policy named from the others.
	isNamed func(*http.Request) bool
	// named reaches the policy's host, and other hosts through a proxy; elsewhere dials other
	// hosts directly, checking each address it dials.
	named, elsewhere *http.Transport
}

// newRedirectGuard guards the requests isNamed does not tell apart as the policy's own.
func newRedirectGuard(origin *url.URL, opts Options, isNamed func(*http.Request) bool) *redirectGuard {
	named := transport(opts)
	elsewhere := named.Clone()
	elsewhere.Proxy = nil
	elsewhere.DialContext = (&checkedDialer{dialer: net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}}).DialContext
	return &redirectGuard{origin: origin, opts: opts, isNamed: isNamed, named: named, elsewhere: elsewhere}
}

func (g *redirectGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if g.origin.Scheme == "https" && req.URL.Scheme != "https" {
		return nil, fmt.Errorf("%w: %s leaves https for %s", ErrRedirectRefused, req.URL.Redacted(), req.URL.Scheme)
	}
	if g.opts.AllowPrivateRedirects || g.isNamed(req) {
		return g.named.RoundTrip(req)
	}
	if g.named.Proxy != nil {
		if p, err := g.named.Proxy(req); err != nil {
			return nil, err
		} else if p != nil {
			// The proxy resolves the name and makes the connection: resolving it here is the
			// nearest check the pull can make.
			if err := refuseResolved(req.Context(), req.URL); err != nil {
				return nil, err
			}
			return g.named.RoundTrip(req)
		}
	}
	return g.elsewhere.RoundTrip(req)
}

// checkedDialer resolves a host once, refuses it if any of its addresses is not public, and
// dials the addresses it checked.
type checkedDialer struct{ dialer net.Dialer }

func (d *checkedDialer) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, err := resolvePublic(ctx, host)
	if err != nil {
		return nil, err
	}
	var first error
	for _, a := range addrs {
		c, err := d.dialer.DialContext(ctx, network, net.JoinHostPort(a.String(), port))
		if err == nil {
			return c, nil
		}
		if first == nil {
			first = err
		}
	}
	return nil, first
}

func refuseResolved(ctx context.Context, u *url.URL) error {
	_, err := resolvePublic(ctx, u.Hostname())
	if err != nil {
		return fmt.Errorf("%s: %w", u.Redacted(), err)
	}
	return nil
}

// resolvePublic resolves host and refuses it when any of its addresses is loopback, private,
// link-local, unspecified or in the shared address space: one private answer among public ones
// is enough to reach inside.
func resolvePublic(ctx context.Context, host string) ([]netip.Addr, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return nil, fmt.Errorf("%w: resolve %s: %v", ErrRedirectRefused, host, err)
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("%w: %s resolves to no address", ErrRedirectRefused, host)
	}
	for i, a := range addrs {
		a = a.Unmap()
		if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() || sharedAddressSpace.Contains(a) {
			return nil, fmt.Errorf("%w: %s resolves to %s, a loopback, private or link-local address", ErrRedirectRefused, host, a)
		}
		addrs[i] = a
	}
	return addrs, nil
}

// sharedAddressSpace (RFC 6598) is private in practice: carrier NAT and some clouds' internal
// networks.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")
