package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/test/benchproc"
)

// BenchmarkStatusPatchCost: what one status patch costs the apiserver (the CPU seconds its own
// /metrics reports) for the two kinds a progressive rollout sends: a root policy's status of
// REGENT_BENCH_CLUSTERS lines (3,000 by default) of which a turn changes 100, as the hub's JSON
// patch writes it (a test and a replace per line), and a spoke's answer on a replica (a merge
// patch of two fields). At 150,000 replicas a turn of 100 clusters carries ~2.5 root patches beside
// its 100 answers.
func BenchmarkStatusPatchCost(b *testing.B) {
	clusters := benchproc.EnvInt("REGENT_BENCH_CLUSTERS", 3000)
	h := fleettest.Hub(b)
	ctx := context.Background()
	admin := rest.CopyConfig(h.Config)
	admin.QPS, admin.Burst = -1, 0
	c, err := client.New(admin, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		b.Fatal(err)
	}
	apiserverCPU := func() float64 {
		raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
		if err != nil {
			b.Fatal(err)
		}
		return benchproc.Sum(string(raw), "process_cpu_seconds_total")
	}
	for _, ns := range []string{"roots", "cluster0000"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
	root := policy("p", "roots")
	if err := c.Create(ctx, root); err != nil {
		b.Fatal(err)
	}
	now := metav1.Now()
	for i := 0; i < clusters; i++ {
		name := fmt.Sprintf("cluster%04d", i)
		root.Status.Status = append(root.Status.Status, &policyv1.CompliancePerClusterStatus{ComplianceState: policyv1.Compliant,
			RolloutStatus: policyv1.RolloutSucceeded, ClusterName: name, ClusterNamespace: name, LastTransitionTime: &now})
	}
	root.Status.ComplianceState, root.Status.RolloutStatus = policyv1.Compliant, policyv1.RolloutProgressing
	if err := c.Status().Update(ctx, root); err != nil {
		b.Fatal(err)
	}
	replica := ceilingReplica("roots.p", "cluster0000", true)
	if err := c.Create(ctx, replica); err != nil {
		b.Fatal(err)
	}

	measure := func(b *testing.B, patch func(i int) error) {
		before := apiserverCPU()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if err := patch(i); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric((apiserverCPU()-before)*1000/float64(b.N), "apiserver-cpu-ms/op")
	}
	b.Run("root-turn", func(b *testing.B) {
		measure(b, func(i int) error {
			state := []policyv1.ComplianceState{policyv1.NonCompliant, policyv1.Compliant}[i%2]
			var ops []jsonPatchOp
			for j := 0; j < min(100, clusters); j++ {
				k := (i/2*100 + j) % clusters
				at := "/status/status/" + strconv.Itoa(k)
				line := *root.Status.Status[k]
				line.ComplianceState = state
				ops = append(ops, jsonPatchOp{Op: "test", Path: at + "/clustername", Value: line.ClusterName},
					jsonPatchOp{Op: "replace", Path: at, Value: line})
			}
			raw, err := json.Marshal(ops)
			if err != nil {
				return err
			}
			return c.Status().Patch(ctx, &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: "roots", Name: "p"}},
				client.RawPatch(types.JSONPatchType, raw))
		})
	})
	b.Run("replica-answer", func(b *testing.B) {
		measure(b, func(i int) error {
			patch := fmt.Sprintf(`{"status":{"compliant":"Compliant","lastEvaluatedGeneration":%d}}`, i+1)
			return c.Status().Patch(ctx, &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster0000", Name: "roots.p"}},
				client.RawPatch(types.MergePatchType, []byte(patch)))
		})
	})
}

// jsonPatchOp is one operation of an RFC 6902 JSON patch.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}
