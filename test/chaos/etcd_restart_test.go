package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/quickstart"
)

// How long TestEtcdRestart keeps the managed cluster's etcd down.
const envEtcdDownSeconds = "REGENT_CHAOS_ETCD_DOWN_SECONDS" // default 5

// TestEtcdRestart_SpokeAndPolicyServerRecoverWithoutRestart stops the etcd of a managed cluster
// for a while and starts it again (same data), while admissions arrive at a fixed rate. The
// spoke addon and the policy server are never restarted: admission is answered throughout (the
// policy server needs no apiserver to answer), the next version of a policy from the hub is
// enforced and its status converges on the hub, a deleted ConfigMap is put back, a new
// generation of the ClusterAdmissionPolicy becomes Ready and answers, and nothing is re-created.
func TestEtcdRestart_SpokeAndPolicyServerRecoverWithoutRestart(t *testing.T) {
	down := time.Duration(envInt(t, envEtcdDownSeconds, 5)) * time.Second
	rate := int(envInt(t, envPSRate, 50))
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	c := f.Managed[0]
	deploy(t, f, false)
	ctx := context.Background()
	ps, err := quickstart.StartPolicyServer(ctx, f, c, regentBin, 2)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Close() })
	addon := startAddon(t, f, c, "", "", "--policy-server-url", ps.URL, "--policy-server-ca", ps.CAFile)
	hub, local := newClient(t, f.Hub), newClient(t, c)
	module, err := filepath.Abs(filepath.Join("testdata", "no-privileged.rego"))
	if err != nil {
		t.Fatal(err)
	}
	root := steadySetup(t, hub, module)
	converged := func(n int) {
		t.Helper()
		fleettest.Eventually(t, 3*time.Minute, func() (bool, string) {
			return rolledOut(ctx, hub, map[string]client.Client{c.Name: local}, steadyRoot, []string{c.Name}, n)
		})
	}
	converged(1)

	// Admissions go through the balancer that stands in for the PolicyServer's Service.
	caPEM, err := os.ReadFile(ps.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := newReadyBalancer(caPEM, []string{strings.TrimPrefix(ps.URL, "https://")})
	if err != nil {
		t.Fatal(err)
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	go lb.probe(loadCtx)
	var path atomic.Value
	path.Store("")
	go followWebhook(loadCtx, local, "no-privileged", &path)
	load := &admissionLoad{lb: lb, rate: rate, served: map[int64]bool{},
		denial:  func(int64) string { return "container app is privileged" },
		webhook: func() string { return path.Load().(string) }}
	loadDone := make(chan struct{})
	go func() { load.run(loadCtx); close(loadDone) }()
	fleettest.Eventually(t, 3*time.Minute, func() (bool, string) {
		return load.hasServed(1), "generation 1 of the ClusterAdmissionPolicy answering"
	})
	before, err := readSpoke(ctx, hub, local, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	capBefore := &kubewardenv1.ClusterAdmissionPolicy{}
	if err := local.Get(ctx, client.ObjectKey{Name: "no-privileged"}, capBefore); err != nil {
		t.Fatal(err)
	}

	restarted := time.Now()
	restartErr := make(chan error, 1)
	go func() { restartErr <- c.RestartEtcd(down) }()
	// The apiserver really lost its storage: a read that must reach etcd fails meanwhile.
	var unavailable error
	for unavailable == nil && time.Since(restarted) < down {
		readCtx, cancel := context.WithTimeout(ctx, time.Second)
		unavailable = local.Get(readCtx, client.ObjectKey{Name: "no-privileged"}, &kubewardenv1.ClusterAdmissionPolicy{})
		cancel()
	}
	if err := <-restartErr; err != nil {
		t.Fatal(err)
	}
	if unavailable == nil {
		t.Fatalf("the apiserver answered reads throughout the %s etcd was down: the restart was not exercised", down)
	}
	t.Logf("etcd of %s down for %s (a read meanwhile: %v), started again", c.Name, down, unavailable)

	// The hub's next version reaches the cluster, is enforced and converges.
	fleettest.Edit(t, hub, root, func(p *policyv1.Policy) {
		p.Spec.PolicyTemplates[0].ObjectDefinition = configMapTemplate(steadyRoot, 2)
	})
	converged(2)
	t.Logf("after the etcd restart, the next version enforced and Compliant on the hub %s after etcd stopped",
		time.Since(restarted).Round(100*time.Millisecond))
	// The addon's watch on the enforced object came back.
	deleteConfigMap(t, local)
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		after, err := readSpoke(ctx, hub, local, c.Name)
		return err == nil && after.configMapVersion == version(2), fmt.Sprintf("the ConfigMap enforced again: %v", err)
	})
	// The policy server's watches came back: a new generation of its policy (the same Rego at
	// another path) is prepared, Ready on both replicas, the webhook moves to it and it answers.
	moved := filepath.Join(t.TempDir(), "no-privileged.rego")
	src, err := os.ReadFile(module)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(moved, src, 0o644); err != nil {
		t.Fatal(err)
	}
	hubCAP := &policyv1.Policy{}
	if err := hub.Get(ctx, client.ObjectKey{Namespace: "policies", Name: "no-privileged"}, hubCAP); err != nil {
		t.Fatal(err)
	}
	fleettest.Edit(t, hub, hubCAP, func(p *policyv1.Policy) {
		raw := strings.Replace(string(p.Spec.PolicyTemplates[0].ObjectDefinition.Raw), module, moved, 1)
		p.Spec.PolicyTemplates[0].ObjectDefinition.Raw = []byte(raw)
	})
	next := capBefore.Generation + 1
	fleettest.Eventually(t, 3*time.Minute, func() (bool, string) {
		return strings.HasSuffix(path.Load().(string), fmt.Sprintf("/%d", next)) && load.hasServed(next),
			fmt.Sprintf("generation %d of the ClusterAdmissionPolicy serving (the webhook calls %s)", next, path.Load())
	})
	stopLoad()
	<-loadDone

	after, err := readSpoke(ctx, hub, local, c.Name)
	if err != nil {
		t.Fatal(err)
	}
	capAfter := &kubewardenv1.ClusterAdmissionPolicy{}
	if err := local.Get(ctx, client.ObjectKey{Name: "no-privileged"}, capAfter); err != nil {
		t.Fatal(err)
	}
	if after.replicaUID != before.replicaUID || after.copyUID != before.copyUID || after.templateUID != before.templateUID || capAfter.UID != capBefore.UID {
		t.Errorf("objects re-created: hub replica %s→%s, the cluster's copy %s→%s, ConfigurationPolicy %s→%s, ClusterAdmissionPolicy %s→%s",
			before.replicaUID, after.replicaUID, before.copyUID, after.copyUID, before.templateUID, after.templateUID, capBefore.UID, capAfter.UID)
	}
	if after.copyGeneration != before.copyGeneration+1 || after.templateGeneration != before.templateGeneration+1 {
		t.Errorf("specs written more than once for one change: the cluster's copy generation %d→%d, ConfigurationPolicy %d→%d",
			before.copyGeneration, after.copyGeneration, before.templateGeneration, after.templateGeneration)
	}
	for name, p := range map[string]*fleet.Process{"the spoke addon": addon, "policy-server replica 0": ps.Replicas[0], "policy-server replica 1": ps.Replicas[1]} {
		select {
		case <-p.Done():
			t.Errorf("%s exited (%v): it must recover by itself", name, p.State())
		default:
		}
	}
	load.mu.Lock()
	defer load.mu.Unlock()
	t.Logf("etcd down %s: %d admissions sent at %d/s, %d answered right, %d failed", down, load.sent, rate, load.answered, len(load.failed))
	if len(load.failed) > 0 {
		t.Errorf("%d admissions failed while etcd restarted; the first: %s", len(load.failed), strings.Join(load.failed[:min(10, len(load.failed))], "\n  "))
	}
}
