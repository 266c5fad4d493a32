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

// checkRedirect refuses a redirect from origin to next that leaves https for plain http, or,
// unless the operator allows it, that reaches a loopback, private, link-local or unspecified
// address (cloud metadata, the cluster's own services).
func checkRedirect(next *http.Request, origin *url.URL, opts Options) error {
	if origin.Scheme == "https" && next.URL.Scheme != "https" {
		return fmt.Errorf("%w: %s leaves https for %s", ErrRedirectRefused, next.URL.Redacted(), next.URL.Scheme)
	}
	if opts.AllowPrivateRedirects {
		return nil
	}
	ctx, cancel := context.WithTimeout(next.Context(), 10*time.Second)
	defer cancel()
	host := next.URL.Hostname()
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return fmt.Errorf("%w: resolve %s: %v", ErrRedirectRefused, host, err)
	}
	for _, a := range addrs {
		a = a.Unmap()
		if a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() || sharedAddressSpace.Contains(a) {
			return fmt.Errorf("%w: %s resolves to %s, a loopback, private or link-local address", ErrRedirectRefused, next.URL.Redacted(), a)
		}
	}
	return nil
}

// sharedAddressSpace (RFC 6598) is private in practice: carrier NAT and some clouds' internal
// networks.
var sharedAddressSpace = netip.MustParsePrefix("100.64.0.0/10")

// redirectGuard applies checkRedirect to every request go-containerregistry makes to a host other
// than the registry's: blob downloads and token endpoints a registry redirects or points to.
// go-containerregistry follows redirects with its own client, so the transport is the one place
// that sees them.
type redirectGuard struct {
	next   http.RoundTripper
	origin *url.URL
	opts   Options
}

func (g *redirectGuard) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Host != g.origin.Host {
		if err := checkRedirect(req, g.origin, g.opts); err != nil {
			return nil, err
		}
	}
	return g.next.RoundTrip(req)
}
