package quickstart

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/policyserver/selfsigned"
	"regent.dev/regent/spoke-addon/admissionpolicy"
	"regent.dev/regent/version"
)

// LocalPolicyServer is a PolicyServer whose replicas are processes on this machine, sharing a
// cache folder, behind a round-robin balancer that stands in for its Service.
type LocalPolicyServer struct {
	// URL is the base URL webhooks call (the balancer).
	URL string
	// CAFile is the PEM CA of the replicas' serving certificate.
	CAFile string
	// Replicas are the replica processes by replica number; Scale changes them.
	Replicas []*fleet.Process

	fleet   *fleet.Fleet
	cluster *fleet.Cluster
	client  client.Client
	bin     string
	dir     string
	certs   selfsigned.Files
	addrs   []string
	lb      *fleet.LoadBalancer
	// mu serialises changes to the replica set: Scale and the quickstart's restarts.
	mu sync.Mutex
}

// Close stops the balancer; the replicas stop with the fleet.
func (p *LocalPolicyServer) Close() error { return p.lb.Close() }

// StartPolicyServer creates PolicyServer "default" on cluster c and runs its replicas as
// `regent policy-server --lifecycle` processes of bin.
func StartPolicyServer(ctx context.Context, f *fleet.Fleet, c *fleet.Cluster, bin string, replicas int) (*LocalPolicyServer, error) {
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, err
	}
	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: kubewardenv1.PolicyServerSpec{Image: version.Image(), Replicas: int32(replicas)}}
	if err := cl.Create(ctx, ps); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("PolicyServer on %s: %w", c.Name, err)
	}
	dir := filepath.Join(c.Dir, "policy-server")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	certs, err := selfsigned.Write(dir, "127.0.0.1")
	if err != nil {
		return nil, err
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, certs.CAPEM, 0o644); err != nil {
		return nil, err
	}
	p := &LocalPolicyServer{CAFile: caFile, fleet: f, cluster: c, client: cl, bin: bin, dir: dir, certs: certs}
	if p.lb, err = fleet.NewLoadBalancer(); err != nil {
		return nil, err
	}
	p.URL = "https://" + p.lb.Addr()
	if err := p.run(replicas); err != nil {
		p.lb.Close()
		return nil, err
	}
	return p, nil
}

// Scale sets the PolicyServer's replicas to n and does what its StatefulSet controller would:
// replicas 0..n-1 run (one that exited is started again, on the same address), higher ones are
// stopped gracefully, and the balancer follows.
func (p *LocalPolicyServer) Scale(ctx context.Context, n int) error {
	ps := &kubewardenv1.PolicyServer{}
	if err := p.client.Get(ctx, client.ObjectKey{Name: "default"}, ps); err != nil {
		return err
	}
	patch := client.MergeFrom(ps.DeepCopy())
	ps.Spec.Replicas = int32(n)
	if err := p.client.Patch(ctx, ps, patch); err != nil {
		return fmt.Errorf("scale PolicyServer on %s: %w", p.cluster.Name, err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.run(n)
}

// supervised gives each replica with the way to start it again: on its own address and
// replica number, as a StatefulSet recreates its pod.
func (p *LocalPolicyServer) supervised() []*supervised {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*supervised, len(p.Replicas))
	for i, proc := range p.Replicas {
		out[i] = &supervised{proc: proc, start: func() (*fleet.Process, error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if i >= len(p.Replicas) {
				return nil, fmt.Errorf("replica %d is no longer wanted (scaled to %d)", i, len(p.Replicas))
			}
			if err := p.run(len(p.Replicas)); err != nil {
				return nil, err
			}
			return p.Replicas[i], nil
		}}
	}
	return out
}

func (p *LocalPolicyServer) run(n int) error {
	for i := n; i < len(p.Replicas); i++ {
		p.Replicas[i].Stop(30 * time.Second)
	}
	if n < len(p.Replicas) {
		p.Replicas, p.addrs = p.Replicas[:n], p.addrs[:n]
	}
	for i := range n {
		if i < len(p.Replicas) && !exited(p.Replicas[i]) {
			continue
		}
		if i == len(p.addrs) {
			addr, err := freePort()
			if err != nil {
				return err
			}
			p.addrs = append(p.addrs, addr)
		}
		proc, err := p.fleet.StartProcess(fmt.Sprintf("regent-policy-server-%s-%d", p.cluster.Name, i), p.bin, "policy-server", "--lifecycle",
			"--kubeconfig", p.cluster.Kubeconfig, "--policy-server", "default", "--namespace", admissionpolicy.DefaultNamespace,
			"--replica", strconv.Itoa(i), "--shared-cache", filepath.Join(p.dir, "shared-cache"),
			"--cache-dir", filepath.Join(p.dir, "private-"+strconv.Itoa(i)),
			// The quickstart runs on the developer's own machine, whose files are the
			// developer's: policies may name any of them, explicitly allowed here.
			"--pull-file-root", "/",
			"--addr", p.addrs[i], "--cert-file", p.certs.CertFile, "--key-file", p.certs.KeyFile,
			// Replicas share this host: each takes a free port for metrics rather than :9090.
			"--metrics-bind-address", "127.0.0.1:0")
		if err != nil {
			return err
		}
		if i < len(p.Replicas) {
			p.Replicas[i] = proc
		} else {
			p.Replicas = append(p.Replicas, proc)
		}
	}
	p.lb.SetBackends(p.addrs...)
	return nil
}

func exited(proc *fleet.Process) bool {
	select {
	case <-proc.Done():
		return true
	default:
		return false
	}
}

// freePort finds a loopback port for a replica to listen on.
func freePort() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
