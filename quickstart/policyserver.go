package quickstart

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/policyserver/selfsigned"
	"regent.dev/regent/spoke-addon/admissionpolicy"
)

// LocalPolicyServer is a PolicyServer whose replicas are processes on this machine, sharing a
// cache folder, behind a round-robin balancer that stands in for its Service.
type LocalPolicyServer struct {
	// URL is the base URL webhooks call (the balancer).
	URL string
	// CAFile is the PEM CA of the replicas' serving certificate.
	CAFile   string
	Replicas []*fleet.Process
	lb       *fleet.LoadBalancer
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
		Spec: kubewardenv1.PolicyServerSpec{Image: "ghcr.io/regent-dev/regent:latest", Replicas: int32(replicas)}}
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
	shared := filepath.Join(dir, "shared-cache")
	p := &LocalPolicyServer{CAFile: caFile}
	var addrs []string
	for i := range replicas {
		addr, err := freePort()
		if err != nil {
			return nil, err
		}
		proc, err := f.StartProcess(fmt.Sprintf("regent-policy-server-%s-%d", c.Name, i), bin, "policy-server", "--lifecycle",
			"--kubeconfig", c.Kubeconfig, "--policy-server", "default", "--namespace", admissionpolicy.DefaultNamespace,
			"--replica", strconv.Itoa(i), "--shared-cache", shared, "--cache-dir", filepath.Join(dir, "private-"+strconv.Itoa(i)),
			"--addr", addr, "--cert-file", certs.CertFile, "--key-file", certs.KeyFile)
		if err != nil {
			return nil, err
		}
		p.Replicas = append(p.Replicas, proc)
		addrs = append(addrs, addr)
	}
	if p.lb, err = fleet.NewLoadBalancer(addrs...); err != nil {
		return nil, err
	}
	p.URL = "https://" + p.lb.Addr()
	return p, nil
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
