package admissionpolicy

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/lifecycle"
	"regent.dev/regent/policyserver/selfsigned"
)

// A PolicyServer whose replicas share no folder at all (ReadWriteOnce storage, or none): the
// leader signs each generation into its own cache, the other replicas fetch it from the leader
// and verify it, every replica reports Ready, and the controller moves the webhook.
func TestPolicyServer_ReplicasWithoutASharedFolder_ServeANewGenerationAndTheWebhookMoves(t *testing.T) {
	t.Parallel()
	hub := fleettest.Hub(t)
	c := startController(t, hub.Config)
	ctx := context.Background()
	const ps = "own-caches"
	if err := c.Create(ctx, &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: ps},
		Spec: kubewardenv1.PolicyServerSpec{Image: "regent:dev", Replicas: 3}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "signing Secret with a transfer token", func() bool {
		s := &corev1.Secret{}
		return c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: signingSecretName(ps)}, s) == nil && len(s.Data[transferTokenKey]) > 0
	})
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		var revs kubewardenv1.PolicyRevisionList
		_ = c.List(ctx, &revs, client.InNamespace(testNamespace))
		for _, r := range revs.Items {
			t.Logf("revision %s: cacheKey %q conditions %+v", r.Name, r.Status.CacheKey, r.Status.Conditions)
		}
		t.Logf("webhook URL %q", webhookURL(t, c, "clusterwide-fetched"))
	})
	// The replicas run as the PolicyServer's ServiceAccount and the leader as its own, as their
	// pods do: leading, finding the leader and fetching from it need nothing the Roles do not grant.
	waitRBAC(t, c, ps, metav1.ConditionTrue, "Granted")
	cfg := serviceAccountConfig(t, hub.Config, serviceAccountName(ps))
	leaderCfg := serviceAccountConfig(t, hub.Config, leaderIdentityName(ps))
	logs := &logLines{}
	logs.captureKlog(t)
	runOwnCacheReplica(t, leaderCfg, lifecycle.RoleLeader, ps, 0, logs.logger())
	roots := make([]string, 3)
	for n := range roots {
		roots[n] = runOwnCacheReplica(t, cfg, lifecycle.RoleReplica, ps, n, logs.logger())
	}

	policy := clusterPolicy("fetched", ps)
	policy.Spec.Module, policy.Spec.ExecutionMode = regoVariant(t, "g1"), "opa"
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	base := "https://127.0.0.1:9443/" + ps + "/validate/clusterwide-fetched/"
	eventually(t, "webhook at generation 1", func() bool { return webhookURL(t, c, "clusterwide-fetched") == base+"1" })

	start := time.Now()
	update(t, c, policy, func() { policy.Spec.Module = regoVariant(t, "g2") })
	eventually(t, "webhook moved to generation 2", func() bool { return webhookURL(t, c, "clusterwide-fetched") == base+"2" })
	t.Logf("webhook moved to generation 2, served by 3 replicas sharing no folder, %v after the policy changed", time.Since(start).Round(10*time.Millisecond))

	rev := &kubewardenv1.PolicyRevision{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: testNamespace, Name: "clusterwide-fetched-g2"}, rev); err != nil {
		t.Fatal(err)
	}
	for n := range int32(3) {
		rs := findReplica(rev.Status.Replicas, n)
		if rs == nil || rs.Ready != metav1.ConditionTrue || rs.Reason != lifecycle.ReasonLoaded || !strings.Contains(rs.Message, "fetched from the leader") {
			t.Errorf("replica %d: %+v, want Ready True %s, fetched from the leader", n, rs, lifecycle.ReasonLoaded)
		}
		if _, err := os.Stat(filepath.Join(roots[n], "v1", rev.Status.CacheKey, "entry.json")); err != nil {
			t.Errorf("replica %d serves generation 2 without the signed entry in its own cache: %v", n, err)
		}
	}
	if refused := logs.matching("forbidden"); len(refused) > 0 {
		t.Errorf("the replicas were refused calls:\n%s", strings.Join(refused, "\n"))
	}
}

// runOwnCacheReplica runs replica n of ps (or its leader) in process, as cfg, with a signed cache
// of its own, advertising its loopback address as a pod advertises its IP; it returns the cache
// folder.
func runOwnCacheReplica(t *testing.T, cfg *rest.Config, role lifecycle.Role, ps string, n int, log logr.Logger) string {
	t.Helper()
	dir := t.TempDir()
	certs, err := selfsigned.Write(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := lifecycle.Options{
		Config: cfg, Role: role, Namespace: testNamespace, PolicyServer: ps, Replica: n, Version: "v1",
		SignedCache: filepath.Join(dir, "signed"), AdvertiseAddress: ln.Addr().String(),
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
		ResyncInterval: 2 * time.Second, RetryInterval: 2 * time.Second,
		Logger: log,
	}
	opts.Pull.FileRoots = []string{os.TempDir()}
	opts.Server.Listener = ln
	opts.Server.CertFile, opts.Server.KeyFile = certs.CertFile, certs.KeyFile
	opts.Server.CacheDir = filepath.Join(dir, "private")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.Run(ctx, opts) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("%s %d returned %v", role, n, err)
			}
		case <-time.After(time.Minute):
			t.Errorf("%s %d did not stop", role, n)
		}
	})
	return opts.SignedCache
}

// regoVariant is an allow-all Rego policy made distinct by variant, so each is its own module.
func regoVariant(t *testing.T, variant string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), variant+".rego")
	src := strings.Join([]string{"package policy", "", "default uid := \"\"", "", "uid := input.request.uid", "",
		fmt.Sprintf("variant := %q", variant), "",
		"main := {\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": \"AdmissionReview\", \"response\": {\"uid\": uid, \"allowed\": true}}", ""}, "\n")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return "file://" + p
}
