package propagator_test

import (
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet"
)

// startPlacementController runs OCM's own placement controller against the hub until the test ends.
func (e *env) startPlacementController() {
	e.t.Helper()
	bin, err := fleet.Binary(fleet.DefaultBinDir(), fleet.OCMBinary)
	if err != nil {
		e.t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(e.t.TempDir(), "placement.log"))
	if err != nil {
		e.t.Fatal(err)
	}
	// Its health and metrics endpoint defaults to :8443, which another fleet on the machine may
	// hold; library-go cannot serve on port 0, so a free port is picked here.
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cmd := exec.CommandContext(e.ctx, bin, "placement", "controller", "--kubeconfig", hubCluster.Kubeconfig,
		"--disable-leader-election", "--namespace", e.ns, "--listen", addr)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		e.t.Fatalf("start placement controller: %v", err)
	}
	e.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if e.t.Failed() {
			out, _ := os.ReadFile(logFile.Name())
			e.t.Logf("placement controller log:\n%s", out)
		}
	})
}

func TestRollout_ProgressivePerGroup_WithOCMsPlacementController(t *testing.T) {
	e := newEnv(t)
	set := e.ns
	setLabel := map[string]string{clusterv1beta2.ClusterSetLabel: set, "env": "dev"}
	var clusters []string
	for _, n := range []string{"c1", "c2", "c3"} {
		clusters = append(clusters, e.cluster(n, setLabel))
	}
	e.create(&clusterv1beta2.ManagedClusterSet{ObjectMeta: metav1.ObjectMeta{Name: set}})
	e.create(&clusterv1beta2.ManagedClusterSetBinding{ObjectMeta: e.objectMeta(set), Spec: clusterv1beta2.ManagedClusterSetBindingSpec{ClusterSet: set}})
	e.create(&clusterv1beta1.Placement{ObjectMeta: e.objectMeta("pl"), Spec: clusterv1beta1.PlacementSpec{
		ClusterSets: []string{set},
		Predicates: []clusterv1beta1.ClusterPredicate{{RequiredClusterSelector: clusterv1beta1.ClusterSelector{
			LabelSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}}}},
		DecisionStrategy: clusterv1beta1.DecisionStrategy{GroupStrategy: clusterv1beta1.GroupStrategy{
			ClustersPerDecisionGroup: intstr.FromInt(1)}},
	}})
	e.startPlacementController()
	e.startHub()
	iw := e.watchInFlight("p", 1)
	e.rootPolicy("p", policyv1.Enforce, &clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.ProgressivePerGroup})
	e.bind("b", "pl", policySubject("p"))
	e.expectReplicas("p", clusters...)
	e.drive("p", compliant, aggregateIs(policyv1.RolloutSucceeded, 3))
	if order := expectNoViolations(t, iw); len(order) != 3 {
		t.Errorf("enforced %v, want each of the 3 clusters once, one group at a time", order)
	}
}
