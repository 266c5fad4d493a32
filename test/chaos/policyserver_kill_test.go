package chaos

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/lifecycle"
	"regent.dev/regent/policyserver/selfsigned"
	"regent.dev/regent/spoke-addon/admissionpolicy"
	regentversion "regent.dev/regent/version"
)

// Sizes of TestPolicyServerKill; docs/reliability.md records a run with 100 updates.
const (
	envPSUpdates  = "REGENT_CHAOS_PS_UPDATES"  // default 10
	envPSKills    = "REGENT_CHAOS_PS_KILLS"    // default 3
	envPSReplicas = "REGENT_CHAOS_PS_REPLICAS" // default 3
	envPSRate     = "REGENT_CHAOS_PS_RATE"     // admissions per second, default 50
)

const chaosPolicy = "chaos-admission"

// psReplicas are a PolicyServer's replicas as `regent policy-server --lifecycle` processes, each
// on its own address, killed with SIGKILL and started again on the same address and replica
// number as its StatefulSet would.
type psReplicas struct {
	f       *fleet.Fleet
	c       *fleet.Cluster
	dir     string
	certs   selfsigned.Files
	addrs   []string
	procs   []*fleet.Process
	runs    []int
	fileDir string
}

func (r *psReplicas) start(i int) error {
	p, err := r.f.StartProcess(fmt.Sprintf("regent-policy-server-%d", i), regentBin, "policy-server", "--lifecycle",
		"--kubeconfig", r.c.Kubeconfig, "--policy-server", "default", "--namespace", admissionpolicy.DefaultNamespace,
		"--replica", strconv.Itoa(i), "--shared-cache", filepath.Join(r.dir, "shared-cache"),
		"--cache-dir", filepath.Join(r.dir, "private-"+strconv.Itoa(i)), "--pull-file-root", r.fileDir,
		"--addr", r.addrs[i], "--cert-file", r.certs.CertFile, "--key-file", r.certs.KeyFile,
		"--metrics-bind-address", "127.0.0.1:0")
	if err != nil {
		return err
	}
	r.procs[i] = p
	r.runs[i]++
	return nil
}

// kill9 SIGKILLs replica i, keeping its log.
func (r *psReplicas) kill9(i int) error {
	p := r.procs[i]
	p.Kill()
	if st := p.State(); st == nil || st.String() != "signal: killed" {
		return fmt.Errorf("replica %d (pid %d) ended with %v, not SIGKILL: it had died before (log: %s)", i, p.PID(), st, p.Log)
	}
	return os.Rename(p.Log, strings.TrimSuffix(p.Log, ".log")+"."+strconv.Itoa(r.runs[i])+".log")
}

// TestPolicyServerKill_UpdatesUnderAdmissionLoadFailNoAdmission runs a PolicyServer's replicas
// as real processes behind a balancer over its ready replicas (the webhook's Service), sends
// them admissions at a fixed rate, applies new generations of a ClusterAdmissionPolicy one after
// the other and SIGKILLs the leader or another replica right after some of the updates. Every
// admission is answered, and answered by the generation the webhook named when it was sent;
// every generation becomes Ready on every replica, the webhook moves to it and it answers.
func TestPolicyServerKill_UpdatesUnderAdmissionLoadFailNoAdmission(t *testing.T) {
	updates := int(envInt(t, envPSUpdates, 10))
	kills := int(envInt(t, envPSKills, 3))
	replicas := int(envInt(t, envPSReplicas, 3))
	rate := int(envInt(t, envPSRate, 50))
	if replicas < 2 || kills > updates || rate < 1 {
		t.Fatalf("need at least 2 replicas (one answers while another dies), kills ≤ updates and a rate: %d, %d, %d", replicas, kills, rate)
	}
	f := fleettest.Start(t, fleet.Options{Managed: []fleet.ClusterSpec{{Name: "cluster1"}}})
	c := f.Managed[0]
	ctx := context.Background()
	local := newClient(t, c)
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, f)
		}
	})

	ps := &kubewardenv1.PolicyServer{ObjectMeta: metav1.ObjectMeta{Name: "default"},
		Spec: kubewardenv1.PolicyServerSpec{Image: regentversion.Image(), Replicas: int32(replicas)}}
	if err := local.Create(ctx, ps); err != nil {
		t.Fatal(err)
	}
	r := &psReplicas{f: f, c: c, dir: filepath.Join(c.Dir, "policy-server"), procs: make([]*fleet.Process, replicas),
		runs: make([]int, replicas), fileDir: t.TempDir()}
	if err := os.MkdirAll(r.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var err error
	if r.certs, err = selfsigned.Write(r.dir, "127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(r.dir, "ca.crt")
	if err := os.WriteFile(caFile, r.certs.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	for i := range replicas {
		r.addrs = append(r.addrs, fleettest.FreeAddr(t))
		if err := r.start(i); err != nil {
			t.Fatal(err)
		}
	}
	// The addon writes the webhook and the revisions; the host in the webhook's URL is replica
	// 0's, but the load sends each admission through the balancer, to the URL's path.
	startAddon(t, f, c, "", "", "--policy-server-url", "https://"+r.addrs[0], "--policy-server-ca", caFile)

	lb, err := newReadyBalancer(r.certs.CAPEM, r.addrs)
	if err != nil {
		t.Fatal(err)
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	go lb.probe(loadCtx)
	var path atomic.Value
	path.Store("")
	go followWebhook(loadCtx, local, chaosPolicy, &path)

	cap := &kubewardenv1.ClusterAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: chaosPolicy}}
	cap.Spec.PolicyServer = "default"
	cap.Spec.Module = "file://" + writeGenerationModule(t, r.fileDir, 1)
	cap.Spec.ExecutionMode = "opa"
	cap.Spec.Mode = "protect"
	cap.Spec.Rules = []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}}}}
	if err := local.Create(ctx, cap); err != nil {
		t.Fatal(err)
	}

	load := &admissionLoad{lb: lb, rate: rate, served: map[int64]bool{}, denial: generationMessage,
		webhook: func() string { return path.Load().(string) }}
	loadDone := make(chan struct{})
	go func() { load.run(loadCtx); close(loadDone) }()

	ref := kubewardenv1.PolicyReference{Kind: kubewardenv1.KindClusterAdmissionPolicy, Name: chaosPolicy}
	serves := func(gen int64) {
		t.Helper()
		fleettest.Eventually(t, 5*time.Minute, func() (bool, string) {
			rev := &kubewardenv1.PolicyRevision{}
			if err := local.Get(ctx, types.NamespacedName{Namespace: admissionpolicy.DefaultNamespace, Name: ref.RevisionName(gen)}, rev); err != nil {
				return false, fmt.Sprintf("revision of generation %d: %v", gen, err)
			}
			for i := range replicas {
				rs := replicaReport(rev, int32(i))
				if rs == nil || rs.Ready != metav1.ConditionTrue {
					return false, fmt.Sprintf("generation %d on replica %d: %+v", gen, i, rs)
				}
			}
			if p := path.Load().(string); !strings.HasSuffix(p, "/"+strconv.FormatInt(gen, 10)) {
				return false, fmt.Sprintf("the webhook calls %q, want generation %d", p, gen)
			}
			return load.hasServed(gen), fmt.Sprintf("generation %d answering a privileged pod with its own message", gen)
		})
	}
	serves(1)

	killAt := map[int]bool{}
	for k := range kills {
		killAt[(k*updates)/kills+1] = true
	}
	killed := 0
	for u := 1; u <= updates; u++ {
		gen := int64(u + 1)
		fleettest.Edit(t, local, cap, func(p *kubewardenv1.ClusterAdmissionPolicy) {
			p.Spec.Module = "file://" + writeGenerationModule(t, r.fileDir, gen)
		})
		if cap.Generation != gen {
			t.Fatalf("the policy is at generation %d after update %d, want %d", cap.Generation, u, gen)
		}
		if killAt[u] {
			leader := leaderReplica(t, local, replicas)
			victim, what := leader, "the leader"
			if killed%2 == 1 || leader < 0 {
				victim, what = (max(leader, 0)+1)%replicas, "a replica that does not lead"
			}
			if err := r.kill9(victim); err != nil {
				t.Fatal(err)
			}
			killed++
			t.Logf("update %d (generation %d): SIGKILLed replica %d, %s (leader was %d)", u, gen, victim, what, leader)
			// The StatefulSet starts the pod again after a moment, on the same identity.
			time.Sleep(time.Second)
			if err := r.start(victim); err != nil {
				t.Fatal(err)
			}
		}
		serves(gen)
	}
	stopLoad()
	<-loadDone

	load.mu.Lock()
	defer load.mu.Unlock()
	t.Logf("%d generations, %d SIGKILLs over %d replicas: %d admissions sent at %d/s, %d answered right, %d cut in flight by a kill (answered right when sent again), %d failed",
		updates+1, killed, replicas, load.sent, rate, load.answered, load.cut, len(load.failed))
	if killed != kills {
		t.Errorf("%d kills made, %d planned", killed, kills)
	}
	if len(load.failed) > 0 {
		t.Errorf("%d admissions failed (no answer, or not the answer of the generation the webhook named); the first: %s",
			len(load.failed), strings.Join(load.failed[:min(10, len(load.failed))], "\n  "))
	}
	for g := int64(1); g <= int64(updates+1); g++ {
		if !load.served[g] {
			t.Errorf("generation %d never answered", g)
		}
	}
}

// followWebhook keeps in path the path of the URL the validating webhook of ClusterAdmissionPolicy
// policy calls, as the apiserver would read it, until ctx ends.
func followWebhook(ctx context.Context, local client.Client, policy string, path *atomic.Value) {
	prefix := "/validate/clusterwide-" + policy + "/"
	for ctx.Err() == nil {
		list := &admissionregistrationv1.ValidatingWebhookConfigurationList{}
		if err := local.List(ctx, list); err == nil {
			for _, cfg := range list.Items {
				for _, w := range cfg.Webhooks {
					if w.ClientConfig.URL != nil {
						if p := webhookPath(*w.ClientConfig.URL); strings.HasPrefix(p, prefix) {
							path.Store(p)
						}
					}
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// leaderReplica is the replica number holding the leader Lease, or -1.
func leaderReplica(t *testing.T, local client.Client, replicas int) int {
	t.Helper()
	lease := &coordinationv1.Lease{}
	if err := local.Get(context.Background(), types.NamespacedName{Namespace: admissionpolicy.DefaultNamespace,
		Name: lifecycle.LeaderLeaseName("default")}, lease); err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity == nil {
		return -1
	}
	// The identity is "<replica>_<random>".
	n, err := strconv.Atoi(strings.SplitN(*lease.Spec.HolderIdentity, "_", 2)[0])
	if err != nil || n >= replicas {
		return -1
	}
	return n
}

func replicaReport(rev *kubewardenv1.PolicyRevision, n int32) *kubewardenv1.ReplicaStatus {
	for i := range rev.Status.Replicas {
		if rev.Status.Replicas[i].Replica == n {
			return &rev.Status.Replicas[i]
		}
	}
	return nil
}

// generationMessage is what generation gen of the test's policy says when it denies.
func generationMessage(gen int64) string { return fmt.Sprintf("denied by generation %d", gen) }

// writeGenerationModule writes the Rego of generation gen: no privileged containers, denied
// with a message naming the generation, so an answer tells which generation gave it.
func writeGenerationModule(t *testing.T, dir string, gen int64) string {
	t.Helper()
	src := fmt.Sprintf(`package policy

default uid := ""

uid := input.request.uid

deny contains msg if {
	some c in input.request.object.spec.containers
	c.securityContext.privileged == true
	msg := sprintf("%s: container %%s is privileged", [c.name])
}

default response := {"allowed": true}

response := {"uid": uid, "allowed": false, "status": {"code": 403, "message": concat("; ", sort(deny))}} if count(deny) > 0

main := {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
`, generationMessage(gen))
	file := filepath.Join(dir, fmt.Sprintf("generation-%d.rego", gen))
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return file
}
