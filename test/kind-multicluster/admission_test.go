package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet"
)

// versionedRego denies :latest images and says which settings version answered, so a test can
// tell which generation of the policy a request met.
const versionedRego = `package policy

default uid := ""

uid := input.request.uid

deny contains msg if {
	some c in input.request.object.spec.containers
	endswith(c.image, ":latest")
	msg := sprintf("container %s uses :latest (policy version %v)", [c.name, data.version])
}

default response := {"allowed": true}

response := {"uid": uid, "allowed": false, "status": {"code": 403, "message": concat("; ", sort(deny))}} if count(deny) > 0

main := {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}
`

// TestAdmissionPolicyLifecycle runs the PolicyRevision lifecycle for real: one managed cluster,
// three `regent policy-server --lifecycle` replicas as processes behind a balancer, the spoke
// addon's controller, and the cluster's apiserver calling the webhooks.
func TestAdmissionPolicyLifecycle(t *testing.T) {
	e := deployWithPolicyServers(t, 3, fleet.ClusterSpec{Name: "cluster1"})
	c := e.local["cluster1"]
	ctx := context.Background()
	dir := t.TempDir()
	good := filepath.Join(dir, "no-latest.rego")
	bad := filepath.Join(dir, "broken.rego")
	if err := os.WriteFile(good, []byte(versionedRego), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bad, []byte("package policy\n\nthis is not rego\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	settings := func(v int) *runtime.RawExtension {
		return &runtime.RawExtension{Raw: []byte(fmt.Sprintf(`{"version": %d}`, v))}
	}
	fail := admissionregistrationv1.Fail
	policy := &kubewardenv1.ClusterAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "no-latest"},
		Spec: kubewardenv1.ClusterAdmissionPolicySpec{PolicySpec: kubewardenv1.PolicySpec{
			PolicyServer: "default", Module: "file://" + good, ExecutionMode: "opa", Mode: kubewardenv1.ModeProtect,
			Settings: settings(1), FailurePolicy: &fail,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
		}},
	}
	if err := c.Create(ctx, policy); err != nil {
		t.Fatal(err)
	}
	update := func(change func(*kubewardenv1.ClusterAdmissionPolicy)) int64 {
		t.Helper()
		var gen int64
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			p := &kubewardenv1.ClusterAdmissionPolicy{}
			if err := c.Get(ctx, types.NamespacedName{Name: "no-latest"}, p); err != nil {
				return err
			}
			change(p)
			err := c.Update(ctx, p)
			gen = p.Generation
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return gen
	}
	waitPolicy := func(what string, ok func(*kubewardenv1.ClusterAdmissionPolicy) bool) {
		t.Helper()
		eventually(t, 2*time.Minute, func() (bool, string) {
			p := &kubewardenv1.ClusterAdmissionPolicy{}
			if err := c.Get(ctx, types.NamespacedName{Name: "no-latest"}, p); err != nil {
				return false, err.Error()
			}
			st, _ := json.Marshal(p.Status)
			return ok(p), fmt.Sprintf("%s: generation %d status %s", what, p.Generation, st)
		})
	}
	activeAt := func(gen int64) func(*kubewardenv1.ClusterAdmissionPolicy) bool {
		return func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			ready := 0
			for _, rs := range p.Status.Replicas {
				if rs.Ready == metav1.ConditionTrue {
					ready++
				}
			}
			return p.Status.Phase == kubewardenv1.PhaseActive && p.Status.ServingGeneration == gen && ready == 3 &&
				meta.IsStatusConditionTrue(p.Status.Conditions, kubewardenv1.ConditionPolicyActive)
		}
	}
	admit := func(image string) error {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Namespace: "default"},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}}}
		return c.Create(ctx, pod, client.DryRunAll)
	}
	deniedBy := func(version string) error {
		err := admit("nginx:latest")
		if err == nil || !strings.Contains(err.Error(), "uses :latest (policy version "+version) {
			return fmt.Errorf("latest pod: %v, want a denial by policy version %s", err, version)
		}
		return nil
	}

	t.Run("CreateBecomesActiveOnEveryReplicaAndTheApiserverEnforcesIt", func(t *testing.T) {
		waitPolicy("Active at generation 1 with 3 Ready replicas", activeAt(1))
		if err := deniedBy("1"); err != nil {
			t.Fatal(err)
		}
		if err := admit("nginx:1.27"); err != nil {
			t.Fatalf("a tagged image was refused: %v", err)
		}
	})

	t.Run("GoodUpdateSwitchesTheWebhook", func(t *testing.T) {
		gen := update(func(p *kubewardenv1.ClusterAdmissionPolicy) { p.Spec.Settings = settings(2) })
		waitPolicy("Active at the new generation", activeAt(gen))
		if err := deniedBy("2"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("BadModuleOrUnreachableRegistryFailsAndTheOldGenerationKeepsAnswering", func(t *testing.T) {
		serving := update(func(*kubewardenv1.ClusterAdmissionPolicy) {}) // current generation
		for _, c := range []struct{ module, reason string }{
			{"file://" + bad, "CompileError"},
			{"registry://127.0.0.1:1/policies/no-latest:v1", "PullError"},
		} {
			gen := update(func(p *kubewardenv1.ClusterAdmissionPolicy) { p.Spec.Module = c.module })
			waitPolicy("Failed with "+c.reason+", still serving the previous generation", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
				said := false
				for _, cond := range p.Status.Conditions {
					said = said || (cond.Status == metav1.ConditionFalse && cond.Reason == c.reason && cond.ObservedGeneration == gen)
				}
				return p.Generation == gen && p.Status.Phase == kubewardenv1.PhaseFailed && p.Status.ServingGeneration == serving && said
			})
			if err := deniedBy("2"); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("RollbackRestoresAKeptGeneration", func(t *testing.T) {
		p := &kubewardenv1.ClusterAdmissionPolicy{}
		_ = c.Get(ctx, types.NamespacedName{Name: "no-latest"}, p)
		target := p.Status.ServingGeneration
		update(func(p *kubewardenv1.ClusterAdmissionPolicy) {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[kubewardenv1.RollbackAnnotation] = fmt.Sprint(target)
		})
		waitPolicy("rolled back and Active", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			return p.Spec.Module == "file://"+good && p.Generation > target+1 && activeAt(p.Generation)(p)
		})
	})

	t.Run("KilledLeaderIsReplacedAndPendingRevisionsComplete", func(t *testing.T) {
		lease := &coordinationv1.Lease{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: "regent-system", Name: "regent-policy-server-default"}, lease); err != nil {
			t.Fatal(err)
		}
		holder := *lease.Spec.HolderIdentity
		var leader *fleet.Process
		for i, p := range e.policyServers["cluster1"].Replicas {
			if strings.Contains(holder, fmt.Sprint(i)) {
				leader = p
			}
		}
		if leader == nil {
			t.Fatalf("no replica holds the leader Lease (holder %q)", holder)
		}
		leader.Kill()
		gen := update(func(p *kubewardenv1.ClusterAdmissionPolicy) { p.Spec.Settings = settings(3) })
		// Two replicas are left: Active with both Ready once the dead one's Lease expires.
		waitPolicy("initialized by a new leader and served", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			return p.Status.Phase == kubewardenv1.PhaseActive && p.Status.ServingGeneration == gen
		})
		if err := deniedBy("3"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("HundredUpdatesUnderLoadFailNoRequest", func(t *testing.T) {
		var requests, failures atomic.Int64
		var firstFailure atomic.Value
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					requests.Add(1)
					err := admit("nginx:latest")
					if err == nil || !strings.Contains(err.Error(), "uses :latest (policy version ") {
						failures.Add(1)
						firstFailure.CompareAndSwap(nil, fmt.Sprint(err))
					}
				}
			}()
		}
		var last int64
		for v := 100; v < 200; v++ {
			last = update(func(p *kubewardenv1.ClusterAdmissionPolicy) { p.Spec.Settings = settings(v) })
			time.Sleep(100 * time.Millisecond)
		}
		waitPolicy("serving the last of 100 updates", func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
			return p.Status.Phase == kubewardenv1.PhaseActive && p.Status.ServingGeneration == last
		})
		close(stop)
		wg.Wait()
		if err := deniedBy("199"); err != nil {
			t.Fatal(err)
		}
		t.Logf("%d admission requests during 100 updates, %d failed", requests.Load(), failures.Load())
		if failures.Load() > 0 {
			t.Fatalf("%d of %d requests were not answered by the policy; first: %v", failures.Load(), requests.Load(), firstFailure.Load())
		}
	})

	t.Run("ScaleThreeToFourToTwoConditionsFollow", func(t *testing.T) {
		ps := e.policyServers["cluster1"]
		replicasAre := func(want string) func(*kubewardenv1.ClusterAdmissionPolicy) bool {
			return func(p *kubewardenv1.ClusterAdmissionPolicy) bool {
				return p.Status.Phase == kubewardenv1.PhaseActive && readyReplicas(p) == want
			}
		}
		// Up to four: the leader killed above comes back, as its StatefulSet pod would, and
		// replica 3 starts; both load the serving generation from the signed cache.
		if err := ps.Scale(ctx, 4); err != nil {
			t.Fatal(err)
		}
		waitPolicy("Ready on replicas 0-3", replicasAre("0=True 1=True 2=True 3=True"))
		// Down to two: replicas 2 and 3 stop, and their conditions go with them.
		if err := ps.Scale(ctx, 2); err != nil {
			t.Fatal(err)
		}
		waitPolicy("Ready on replicas 0-1 only", replicasAre("0=True 1=True"))
		if err := deniedBy("199"); err != nil {
			t.Fatal(err)
		}
	})
}

// readyReplicas lists the policy's per-replica reports in replica order, as "0=True 1=False".
func readyReplicas(p *kubewardenv1.ClusterAdmissionPolicy) string {
	byReplica := map[int32]metav1.ConditionStatus{}
	for _, rs := range p.Status.Replicas {
		byReplica[rs.Replica] = rs.Ready
	}
	var out []string
	for _, n := range slices.Sorted(maps.Keys(byReplica)) {
		out = append(out, fmt.Sprintf("%d=%s", n, byReplica[n]))
	}
	return strings.Join(out, " ")
}
