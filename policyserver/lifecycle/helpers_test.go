package lifecycle

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/internal/guests"
	"regent.dev/regent/policyserver/lifecycle/signing"
	"regent.dev/regent/policyserver/selfsigned"
)

const testNamespace = "regent-system"

// env is one real apiserver shared by a test's policy servers (each has its own name, so its
// own Leases, Secret and revisions).
type env struct {
	config *rest.Config
	client client.Client
	certs  selfsigned.Files
	// caFile holds the CA of certs: replicas without a shared folder authenticate their leader
	// with it.
	caFile string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	hub := fleettest.Hub(t)
	c, err := client.New(hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}); err != nil {
		t.Fatal(err)
	}
	certs, err := selfsigned.Write(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return &env{config: hub.Config, client: c, certs: certs, caFile: writeFile(t, "serving-ca.crt", certs.CAPEM)}
}

// policyServer creates the signing Secret a controller would, and returns a shared cache.
func (e *env) policyServer(t *testing.T, ps string) string {
	t.Helper()
	data, err := signing.NewSecretData(ps, time.Now(), 24*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pub, key := signing.SplitSecretData(data)
	for name, data := range map[string]map[string][]byte{signing.SecretName(ps): pub, signing.KeySecretName(ps): key} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: testNamespace}, Data: data}
		if err := e.client.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	return t.TempDir()
}

// replicaHandle is a running replica: its HTTPS address and a way to stop it.
type replicaHandle struct {
	url    string
	client *http.Client
	stop   func()
	done   chan error
}

// startReplica runs Run in process, on a loopback port, with short Leases.
func (e *env) startReplica(t *testing.T, opts Options) *replicaHandle {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Config = e.config
	opts.Namespace = testNamespace
	opts.Server.Listener = ln
	if opts.SignedCache != "" && opts.AdvertiseAddress == "" {
		opts.AdvertiseAddress = ln.Addr().String() // as a pod advertises its IP
	}
	opts.Server.CertFile, opts.Server.KeyFile = e.certs.CertFile, e.certs.KeyFile
	if opts.SignedCache != "" && opts.PeerCAFile == "" {
		opts.PeerCAFile, opts.PeerServerName = e.caFile, "127.0.0.1" // the name the certificate is issued for
	}
	if opts.Pull.FileRoots == nil {
		// Tests write their modules under the temporary directory: allowed explicitly.
		opts.Pull.FileRoots = []string{os.TempDir()}
	}
	if opts.Server.CacheDir == "" {
		opts.Server.CacheDir = filepath.Join(t.TempDir(), "private")
	}
	opts.LeaseDuration, opts.RenewDeadline, opts.RetryPeriod = 4*time.Second, 3*time.Second, 500*time.Millisecond
	opts.ResyncInterval, opts.RetryInterval = 2*time.Second, 2*time.Second
	if testing.Verbose() {
		opts.Logger = testr.New(t)
	}
	ctx, cancel := context.WithCancel(context.Background())
	h := &replicaHandle{url: "https://" + ln.Addr().String(), stop: cancel, done: make(chan error, 1)}
	go func() { h.done <- Run(ctx, opts) }()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.certs.CAPEM)
	h.client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	t.Cleanup(func() { h.kill(t) })
	return h
}

// kill stops the replica and waits for Run to return.
func (h *replicaHandle) kill(t *testing.T) {
	h.stop()
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("replica returned %v", err)
		}
		h.done <- nil // a second kill returns at once
	case <-time.After(60 * time.Second):
		t.Error("replica did not stop")
	}
}

// review posts an admission request for a pod running image to path; it returns the HTTP
// status and whether the request was allowed.
func (h *replicaHandle) review(t *testing.T, path, image string) (int, bool) {
	t.Helper()
	pod := map[string]any{"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": "p", "namespace": "default", "labels": map[string]any{"team": "a"}},
		"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": image}}}}
	body, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
		"request": map[string]any{"uid": "705ab4f5-6393-11e8-b7cc-42010a800002", "operation": "CREATE",
			"kind":      map[string]any{"group": "", "version": "v1", "kind": "Pod"},
			"resource":  map[string]any{"group": "", "version": "v1", "resource": "pods"},
			"namespace": "default", "name": "p", "userInfo": map[string]any{"username": "alice"}, "object": pod}})
	resp, err := h.client.Post(h.url+path, "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode, false
	}
	var rev admissionv1.AdmissionReview
	if err := json.Unmarshal(raw, &rev); err != nil || rev.Response == nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return resp.StatusCode, rev.Response.Allowed
}

func (h *replicaHandle) readyz(t *testing.T) int {
	resp, err := h.client.Get(h.url + "/readyz")
	if err != nil {
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// createRevision writes the revision a controller would for generation gen of a cluster-wide
// policy.
func (e *env) createRevision(t *testing.T, ps, policy string, gen int64, spec kubewardenv1.PolicySpec) *kubewardenv1.PolicyRevision {
	t.Helper()
	spec.PolicyServer = ps
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	ref := kubewardenv1.PolicyReference{APIVersion: "policies.kubewarden.io/v1", Kind: kubewardenv1.KindClusterAdmissionPolicy, Name: policy}
	rev := &kubewardenv1.PolicyRevision{
		ObjectMeta: metav1.ObjectMeta{Name: ref.RevisionName(gen), Namespace: testNamespace,
			Labels: map[string]string{kubewardenv1.PolicyServerLabel: ps}},
		Spec: kubewardenv1.PolicyRevisionSpec{ObjectReference: ref, PolicyGeneration: gen, Enabled: true,
			Data: runtime.RawExtension{Raw: data}},
	}
	if err := e.client.Create(context.Background(), rev); err != nil {
		t.Fatal(err)
	}
	return rev
}

// waitRevision polls the revision until ok holds (60s: the machine is shared and compiling).
func (e *env) waitRevision(t *testing.T, name, what string, ok func(*kubewardenv1.PolicyRevision) bool) *kubewardenv1.PolicyRevision {
	t.Helper()
	var rev kubewardenv1.PolicyRevision
	deadline := time.Now().Add(90 * time.Second)
	for {
		err := e.client.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: name}, &rev)
		if err == nil && ok(&rev) {
			return &rev
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(rev.Status, "", "  ")
			t.Fatalf("revision %s never %s (err %v); status %s", name, what, err, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func cond(rev *kubewardenv1.PolicyRevision, typ string) *kubewardenv1.PolicyCondition {
	return findCondition(rev.Status.Conditions, kubewardenv1.PolicyCondition{Type: typ})
}

// report is replica n's entry in the revision's status.replicas.
func report(rev *kubewardenv1.PolicyRevision, n int32) *kubewardenv1.ReplicaStatus {
	return findReplica(rev.Status.Replicas, n)
}

func initializedWith(status metav1.ConditionStatus, reason string) func(*kubewardenv1.PolicyRevision) bool {
	return func(r *kubewardenv1.PolicyRevision) bool {
		c := cond(r, kubewardenv1.ConditionInitialized)
		return c != nil && c.Status == status && c.Reason == reason && c.PolicyGeneration == r.Spec.PolicyGeneration
	}
}

func readyOn(replica int32, reason string) func(*kubewardenv1.PolicyRevision) bool {
	return func(r *kubewardenv1.PolicyRevision) bool {
		c := report(r, replica)
		return c != nil && c.Ready == metav1.ConditionTrue && c.PolicyGeneration == r.Spec.PolicyGeneration && (reason == "" || c.Reason == reason)
	}
}

// regoSource is the disallow-latest Rego policy, optionally with a distinguishing comment so
// each copy is a distinct module.
func regoSource(t testing.TB, variant string) []byte {
	t.Helper()
	root, err := guests.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "policyserver", "testdata", "rego", "disallow-latest.rego"))
	if err != nil {
		t.Fatal(err)
	}
	if variant != "" {
		b = append(b, fmt.Sprintf("\nvariant := %q\n", variant)...)
	}
	return b
}

func writeFile(t testing.TB, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func regoSpec(module string) kubewardenv1.PolicySpec {
	return kubewardenv1.PolicySpec{Module: module, ExecutionMode: "opa"}
}
