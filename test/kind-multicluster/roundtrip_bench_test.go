package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet"
)

// BenchmarkStatusRoundTrip measures what a user waits for after changing a policy: from the root
// policy's update on the hub until the hub replica reports the cluster's compliance for that
// generation — propagation, spec sync, template sync, the ConfigurationPolicy evaluation and status
// sync, across real processes. It reports p50/p99 over 100 changes and the addon's RSS.
//
//	go test ./test/kind-multicluster -run '^$' -bench StatusRoundTrip -benchtime 1x
func BenchmarkStatusRoundTrip(b *testing.B) {
	e := deploy(b, fleet.ClusterSpec{Name: "cluster1", Labels: map[string]string{"environment": "dev"}})
	e.apply(b, `apiVersion: v1
kind: Namespace
metadata: {name: policies}`, `apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSet
metadata: {name: e2e}
spec: {clusterSelector: {selectorType: LabelSelector, labelSelector: {}}}`, `apiVersion: cluster.open-cluster-management.io/v1beta2
kind: ManagedClusterSetBinding
metadata: {name: e2e, namespace: policies}
spec: {clusterSet: e2e}`, placementYAML)
	e.apply(b, policyYAML("roundtrip", "type: All", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: roundtrip, namespace: default}\ndata: {round: \"0\"}", "")...)
	ctx := context.Background()
	waitEvaluated := func(generation int64) {
		for {
			r := &policyv1.Policy{}
			err := e.hub.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: "policies.roundtrip"}, r)
			if err == nil && r.Generation >= generation && r.Status.LastEvaluatedGeneration == r.Generation && r.Status.ComplianceState != "" {
				return
			}
			time.Sleep(2 * time.Millisecond)
		}
	}
	waitEvaluated(1)
	for b.Loop() {
		var lat, prop []time.Duration
		for i := 1; i <= 100; i++ {
			root := &policyv1.Policy{}
			start := time.Now()
			// Each change alternates the template between inform and enforce: a new generation
			// every time, evaluated by the ConfigurationPolicy controller. The hub writes the
			// root's status meanwhile, hence the retry.
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := e.hub.Get(ctx, types.NamespacedName{Namespace: "policies", Name: "roundtrip"}, root); err != nil {
					return err
				}
				root.Spec.RemediationAction = map[bool]policyv1.RemediationAction{true: policyv1.Inform, false: policyv1.Enforce}[i%2 == 0]
				return e.hub.Update(ctx, root)
			})
			if err != nil {
				b.Fatal(err)
			}
			replica := &policyv1.Policy{}
			for {
				if err := e.hub.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: "policies.roundtrip"}, replica); err == nil &&
					replica.Spec.RemediationAction == root.Spec.RemediationAction {
					break
				}
				time.Sleep(time.Millisecond)
			}
			propagated := time.Since(start)
			waitEvaluated(replica.Generation)
			lat = append(lat, time.Since(start))
			prop = append(prop, propagated)
		}
		slices.Sort(lat)
		b.ReportMetric(float64(lat[49].Milliseconds()), "p50-ms")
		b.ReportMetric(float64(lat[98].Milliseconds()), "p99-ms")
		slices.Sort(prop)
		b.ReportMetric(float64(prop[49].Milliseconds()), "hub-propagation-p50-ms")
	}
	b.ReportMetric(float64(rssKiB(e.addons["cluster1"].PID()))/1024, "addon-MiB-RSS")
	b.ReportMetric(float64(rssKiB(e.hubPID))/1024, "hub-MiB-RSS")
	fmt.Fprintln(os.Stderr, "round trips measured")
}

func rssKiB(pid int) int {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) >= 2 && fields[0] == "VmRSS:" {
			n, _ := strconv.Atoi(fields[1])
			return n
		}
	}
	return 0
}
