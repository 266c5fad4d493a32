package fleet

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
)

// LoadBalancer spreads TCP connections round-robin over backends, skipping any that refuse:
// what a Service does for a StatefulSet's replicas in a cluster, for replicas that are local
// processes.
type LoadBalancer struct {
	ln       net.Listener
	backends atomic.Pointer[[]string]
	next     atomic.Uint64
	wg       sync.WaitGroup
}

// NewLoadBalancer listens on a free loopback port.
func NewLoadBalancer(backends ...string) (*LoadBalancer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	lb := &LoadBalancer{ln: ln}
	lb.SetBackends(backends...)
	lb.wg.Add(1)
	go lb.serve()
	return lb, nil
}

// SetBackends replaces the backends for new connections, as endpoints follow a scaled
// StatefulSet; connections in flight stay where they are.
func (lb *LoadBalancer) SetBackends(backends ...string) {
	b := append([]string(nil), backends...)
	lb.backends.Store(&b)
}

// Addr is host:port to dial.
func (lb *LoadBalancer) Addr() string { return lb.ln.Addr().String() }

// Close stops accepting; connections in flight finish on their own.
func (lb *LoadBalancer) Close() error {
	err := lb.ln.Close()
	lb.wg.Wait()
	return err
}

func (lb *LoadBalancer) serve() {
	defer lb.wg.Done()
	for {
		in, err := lb.ln.Accept()
		if err != nil {
			return
		}
		go lb.forward(in)
	}
}

func (lb *LoadBalancer) forward(in net.Conn) {
	start := lb.next.Add(1)
	backends := *lb.backends.Load()
	for i := range len(backends) {
		out, err := net.Dial("tcp", backends[(int(start)+i)%len(backends)])
		if err != nil {
			continue // a replica that is down: try the next, as endpoints would drop it
		}
		go func() { _, _ = io.Copy(out, in); out.Close() }()
		_, _ = io.Copy(in, out)
		in.Close()
		return
	}
	in.Close()
}
