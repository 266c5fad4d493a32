package chaos

import (
	"errors"
	"io"
	"net"
	"sync"
	"testing"
)

// cutProxy is a TCP proxy the test puts between a Regent process and an apiserver. Cut resets
// every connection through it (RST, as a dropped NAT entry or a restarted load balancer does) and
// resets new ones until Heal; TLS passes through untouched, so the client still talks to the
// apiserver it trusts.
type cutProxy struct {
	ln     net.Listener
	target string

	mu       sync.Mutex
	cut      bool
	conns    map[*net.TCPConn]struct{}
	accepted int // connections proxied, in all
	refused  int // connections reset on arrival while cut
}

func startProxy(t testing.TB, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target, conns: map[*net.TCPConn]struct{}{}}
	go p.serve()
	t.Cleanup(func() { ln.Close(); p.Cut() })
	return p
}

// Addr is where clients connect instead of the target.
func (p *cutProxy) Addr() string { return p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		in := c.(*net.TCPConn)
		p.mu.Lock()
		if p.cut {
			p.refused++
			p.mu.Unlock()
			reset(in)
			continue
		}
		p.accepted++
		p.conns[in] = struct{}{}
		p.mu.Unlock()
		go p.pipe(in)
	}
}

func (p *cutProxy) pipe(in *net.TCPConn) {
	c, err := net.Dial("tcp", p.target)
	if err != nil {
		p.drop(in)
		reset(in)
		return
	}
	out := c.(*net.TCPConn)
	p.mu.Lock()
	if p.cut { // cut while dialling
		p.mu.Unlock()
		p.drop(in)
		reset(in)
		reset(out)
		return
	}
	p.conns[out] = struct{}{}
	p.mu.Unlock()
	var wg sync.WaitGroup
	wg.Add(2)
	copyHalf := func(dst, src *net.TCPConn) {
		defer wg.Done()
		if _, err := io.Copy(dst, src); err == nil || errors.Is(err, net.ErrClosed) {
			_ = dst.CloseWrite()
		}
	}
	go copyHalf(out, in)
	go copyHalf(in, out)
	wg.Wait()
	p.drop(in)
	p.drop(out)
	in.Close()
	out.Close()
}

func (p *cutProxy) drop(c *net.TCPConn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// Cut resets every open connection and every new one until Heal.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	p.cut = true
	open := p.conns
	p.conns = map[*net.TCPConn]struct{}{}
	p.mu.Unlock()
	for c := range open {
		reset(c)
	}
}

// Heal lets connections through again.
func (p *cutProxy) Heal() {
	p.mu.Lock()
	p.cut = false
	p.mu.Unlock()
}

// counts says how many connections were proxied and refused so far.
func (p *cutProxy) counts() (accepted, refused int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.accepted, p.refused
}

// reset closes c with an RST rather than a FIN, as a broken path does.
func reset(c *net.TCPConn) {
	_ = c.SetLinger(0)
	_ = c.Close()
}
