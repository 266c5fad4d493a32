package capabilities

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/utils/clock"

	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/signatures"
)

// Errors a guest can receive, wrapped with what it asked for; Outcome sorts results by them.
var (
	// ErrNotAllowed: the policy asked for a kind its contextAwareResources do not list.
	ErrNotAllowed = errors.New("not in the policy's contextAwareResources")
	// ErrNotServed: the capability exists in Kubewarden but this server does not serve it.
	ErrNotServed = errors.New("not served by this policy server")
	// ErrNoKubernetes: the server was started without a way to reach a cluster.
	ErrNoKubernetes = errors.New("this policy server has no Kubernetes access configured")
)

// DefaultKubernetesTTL is how long a Kubernetes answer is reused: Kubewarden's five seconds, long
// enough to absorb a burst of admissions, short enough that a label change is seen promptly.
const DefaultKubernetesTTL = 5 * time.Second

// ociTTL is how long a registry answer is reused, as in Kubewarden: each one costs round trips
// to a remote registry.
const ociTTL = time.Minute

// Options configure a Host.
type Options struct {
	// Kubernetes reaches the cluster policies read from; nil makes every Kubernetes capability
	// fail with ErrNoKubernetes.
	Kubernetes *rest.Config
	// RegistryCAs, when set, are the only roots trusted for registries (the system roots
	// otherwise); InsecureRegistries allows plain http to every registry.
	RegistryCAs        *x509.CertPool
	InsecureRegistries bool
	// Sigstore is the trust root keyless verification requests (oci v1/verify and v2/verify)
	// are checked against: the PolicyServer's sigstoreTrustConfig. Without one they are
	// refused with signatures.ErrNoTrustRoot.
	Sigstore *signatures.TrustRoot
	// KubernetesTTL is how long a Kubernetes answer is reused (default DefaultKubernetesTTL).
	KubernetesTTL time.Duration
	Clock         clock.PassiveClock
	// Logger receives the guests' tracing/log lines.
	Logger logr.Logger
}

// Host serves Kubewarden's host capabilities; it implements engine.Host and is safe for
// concurrent use.
type Host struct {
	kube *kubernetesLookups // nil without Options.Kubernetes
	// replicator fills Gatekeeper policies' inventories; nil without Options.Kubernetes.
	replicator *replicator
	registry   *registries
	clock      clock.PassiveClock
	log        logr.Logger
}

// New builds a Host. It does not contact the cluster: discovery happens on the first lookup,
// so a server starts even while its apiserver is down.
func New(opts Options) (*Host, error) {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.KubernetesTTL <= 0 {
		opts.KubernetesTTL = DefaultKubernetesTTL
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	h := &Host{
		registry: newRegistries(opts.RegistryCAs, opts.InsecureRegistries, newTTLCache(ociTTL, opts.Clock), opts.Sigstore, opts.Clock),
		clock:    opts.Clock,
		log:      opts.Logger,
	}
	if opts.Kubernetes != nil {
		var err error
		if h.kube, err = newKubernetesLookups(opts.Kubernetes, newTTLCache(opts.KubernetesTTL, opts.Clock), opts.Clock); err != nil {
			return nil, fmt.Errorf("host capabilities: %w", err)
		}
		if h.replicator, err = newReplicator(opts.Kubernetes, h.kube, opts.Logger.WithName("inventory")); err != nil {
			return nil, fmt.Errorf("host capabilities: %w", err)
		}
	}
	return h, nil
}

// Call serves one host call.
func (h *Host) Call(ctx context.Context, c engine.HostCall) ([]byte, error) {
	if c.Binding != "kubewarden" {
		return nil, fmt.Errorf("host capability %s is %w (it serves the binding kubewarden only)", c.Capability(), ErrNotServed)
	}
	switch c.Namespace + "/" + c.Operation {
	case "kubernetes/get_resource", "kubernetes/list_resources_by_namespace", "kubernetes/list_resources_all", "kubernetes/can_i":
		if h.kube == nil {
			return nil, fmt.Errorf("host capability %s: %w (give `regent policy-server` a --kubeconfig, or run it in a pod)", c.Capability(), ErrNoKubernetes)
		}
		return h.kube.call(ctx, c)
	case "oci/v1/manifest_digest":
		return h.registry.manifestDigest(ctx, c.Payload)
	case "oci/v1/oci_manifest":
		return h.registry.manifest(ctx, c.Payload)
	case "net/v1/dns_lookup_host":
		return lookupHost(ctx, c.Payload)
	case "crypto/v1/is_certificate_trusted":
		return isCertificateTrusted(c.Payload, h.clock.Now())
	case "tracing/log":
		return nil, logLine(h.log, c.Policy, c.Payload)
	case "oci/v1/verify":
		return h.registry.verifyV1(ctx, c.Payload)
	case "oci/v2/verify":
		return h.registry.verifyV2(ctx, c.Payload)
	}
	return nil, fmt.Errorf("host capability %s is %w", c.Capability(), ErrNotServed)
}

// kubewardenCapabilities are the capabilities Kubewarden defines, served or not.
var kubewardenCapabilities = map[string]bool{
	"kubewarden/kubernetes/get_resource": true, "kubewarden/kubernetes/list_resources_by_namespace": true,
	"kubewarden/kubernetes/list_resources_all": true, "kubewarden/kubernetes/can_i": true,
	"kubewarden/oci/v1/manifest_digest": true, "kubewarden/oci/v1/oci_manifest": true,
	"kubewarden/oci/v1/oci_manifest_config": true, "kubewarden/oci/v1/verify": true, "kubewarden/oci/v2/verify": true,
	"kubewarden/net/v1/dns_lookup_host": true, "kubewarden/crypto/v1/is_certificate_trusted": true,
	"kubewarden/tracing/log": true,
}

// Label names a call's capability for a metric: its name when Kubewarden defines it, "other"
// otherwise, since the guest chooses the name and must not choose the metric's cardinality.
func Label(c engine.HostCall) string {
	if name := c.Capability(); kubewardenCapabilities[name] {
		return name
	}
	return "other"
}

// Outcome sorts a host call's result for metrics: ok, not_allowed, not_served, no_kubernetes,
// timeout or error.
func Outcome(err error) string {
	switch {
	case err == nil:
		return "ok"
	case errors.Is(err, ErrNotAllowed):
		return "not_allowed"
	case errors.Is(err, ErrNotServed):
		return "not_served"
	case errors.Is(err, ErrNoKubernetes):
		return "no_kubernetes"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return "timeout"
	}
	return "error"
}
