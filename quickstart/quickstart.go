package quickstart

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"regent.dev/regent/fleet"
	spokeaddon "regent.dev/regent/spoke-addon"
)

// Clusters are the quickstart's managed clusters: two environments across two regions, so a
// Placement can pick by either.
var Clusters = []fleet.ClusterSpec{
	{Name: "cluster1", Labels: map[string]string{"environment": "dev", "region": "emea"}},
	{Name: "cluster2", Labels: map[string]string{"environment": "prod", "region": "emea"}},
	{Name: "cluster3", Labels: map[string]string{"environment": "prod", "region": "apac"}},
}

// PolicyServerReplicas is how many policy-server replicas each managed cluster runs.
const PolicyServerReplicas = 2

// Options configure a quickstart run.
type Options struct {
	// BinDir holds the fleet's binaries; fleet.DefaultBinDir when empty.
	BinDir string
	// TestbinScript builds missing binaries; run when they are missing and it exists (empty:
	// never; FindTestbinScript finds the clone's).
	TestbinScript string
	// Lifetime stops the fleet by itself after this long; 0 waits for ctx.
	Lifetime time.Duration
	// Out receives what a user reads.
	Out io.Writer
	// RealNode gives RealNodeCluster a real node (root and Debian's containerd, runc and CNI
	// plugins; CheckRealNode) and shows a pod Running on it and a privileged one refused. Without
	// what it needs the run fails at once, saying what is missing.
	RealNode bool
	// RealNodeWithin bounds the real-node demonstration; 5 minutes when zero.
	RealNodeWithin time.Duration
}

// Run starts the fleet, prints how to use it, waits for ctx (Ctrl-C) or the lifetime, and stops.
func Run(ctx context.Context, opts Options) error {
	if opts.BinDir == "" {
		opts.BinDir = fleet.DefaultBinDir()
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	fleetOpts := fleet.Options{Managed: Clusters, BinDir: opts.BinDir, Log: opts.Out}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if opts.RealNode {
		// Before anything is built or started: a missing package must not cost a fleet start.
		if err := CheckRealNode(opts.BinDir, self); err != nil {
			return err
		}
	}
	if err := ensureBinaries(ctx, opts); err != nil {
		return err
	}
	if opts.RealNode {
		// The node imports the image while it starts; the tarball is not needed after that.
		imageDir, err := os.MkdirTemp("", "regent-quickstart-image-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(imageDir)
		tarball, err := writeNodeImage(imageDir, self)
		if err != nil {
			return err
		}
		fleetOpts.Managed = withRealNode(Clusters, RealNodeCluster)
		fleetOpts.NodeImages, fleetOpts.PauseImage = []string{tarball}, nodeImage
	}
	f, err := fleet.Start(ctx, fleetOpts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(opts.Out, "stopping the fleet")
		if err := f.Stop(); err != nil {
			fmt.Fprintln(opts.Out, "stop:", err)
		}
	}()
	if opts.Lifetime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opts.Lifetime)
		defer cancel()
	}
	if opts.RealNode {
		if err := taintNode(ctx, f.Cluster(RealNodeCluster)); err != nil {
			return err
		}
	}
	board, err := prepareDashboard(f.Dir)
	if err != nil {
		return err
	}
	procs, err := startRegent(ctx, f, opts.BinDir, board)
	if err != nil {
		return err
	}
	sv, err := newSupervisor(opts.Out, filepath.Join(f.Dir, "run"))
	if err != nil {
		return err
	}
	// Supervision ends, and every restart it began has finished, before the fleet stops, so
	// Stop sees each process that was ever started.
	svCtx, stopSupervising := context.WithCancel(ctx)
	defer func() { stopSupervising(); sv.wait() }()
	for _, p := range procs {
		sv.keep(svCtx, p)
	}
	if err := applySample(ctx, f.Hub.Config, f.Dir); err != nil {
		return err
	}
	if err := grantDashboardViewer(ctx, f.Hub.Config); err != nil {
		return err
	}
	printGuide(opts.Out, f, opts.BinDir, board)
	if opts.RealNode {
		within := opts.RealNodeWithin
		if within == 0 {
			within = 5 * time.Minute
		}
		// Ctrl-C during the demonstration is a stop, not a failure.
		if err := showRealNode(ctx, opts.Out, f.Cluster(RealNodeCluster), within); err != nil && ctx.Err() == nil {
			return fmt.Errorf("real node: %w", err)
		}
	}
	<-ctx.Done()
	return nil
}

// withRealNode is specs with a real node on the cluster named name.
func withRealNode(specs []fleet.ClusterSpec, name string) []fleet.ClusterSpec {
	out := make([]fleet.ClusterSpec, len(specs))
	for i, s := range specs {
		s.RealNode = s.Name == name
		out[i] = s
	}
	return out
}

// startRegent runs, as the separate processes a real deployment has, OCM's placement controller,
// Regent's hub (serving the dashboard), and on each managed cluster a spoke addon with its own hub identity and a
// two-replica policy server; each comes with the way to start it again.
func startRegent(ctx context.Context, f *fleet.Fleet, binDir string, board localDashboard) ([]*supervised, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	startPlacement := func() (*fleet.Process, error) { return f.StartPlacementController(binDir) }
	placement, err := startPlacement()
	if err != nil {
		return nil, err
	}
	hubProc, err := launch(f, "regent-hub", self, append([]string{"hub", "--kubeconfig", f.Hub.Kubeconfig, "--metrics-bind-address", "0"}, board.hubArgs...)...)
	if err != nil {
		return nil, err
	}
	procs := []*supervised{{proc: placement, start: startPlacement}, hubProc}
	for _, c := range f.Managed {
		identity, err := spokeaddon.IssueHubIdentity(ctx, f.Hub.Config, c.Name, 24*3600)
		if err != nil {
			return nil, err
		}
		hubKubeconfig := filepath.Join(c.Dir, "hub-identity.kubeconfig")
		if err := fleet.WriteKubeconfig(hubKubeconfig, identity); err != nil {
			return nil, err
		}
		ps, err := StartPolicyServer(ctx, f, c, self, PolicyServerReplicas)
		if err != nil {
			return nil, err
		}
		procs = append(procs, ps.supervised()...)
		p, err := launch(f, "regent-spoke-addon-"+c.Name, self, "spoke-addon", "--hub-kubeconfig", hubKubeconfig,
			"--kubeconfig", c.Kubeconfig, "--cluster-name", c.Name, "--metrics-bind-address", "0",
			"--policy-server-url", ps.URL, "--policy-server-ca", ps.CAFile)
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
	}
	return procs, nil
}

func ensureBinaries(ctx context.Context, opts Options) error {
	missing := fleet.CheckBinaries(opts.BinDir)
	if missing == nil {
		return nil
	}
	if _, err := os.Stat(opts.TestbinScript); opts.TestbinScript == "" || err != nil {
		return missing
	}
	fmt.Fprintf(opts.Out, "%v\nbuilding them now with %s (once; several minutes on 2 cores)\n", missing, opts.TestbinScript)
	cmd := exec.CommandContext(ctx, "bash", opts.TestbinScript)
	cmd.Stdout, cmd.Stderr = opts.Out, opts.Out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build test binaries: %w", err)
	}
	return fleet.CheckBinaries(opts.BinDir)
}

func printGuide(out io.Writer, f *fleet.Fleet, binDir string, board localDashboard) {
	kubectl := "kubectl"
	if p, err := fleet.Binary(binDir, "kubectl"); err == nil {
		kubectl = p
	}
	fmt.Fprintf(out, "\nRegent quickstart fleet is up.\n\nkubeconfigs:\n")
	fmt.Fprintf(out, "  %-9s %s\n", "hub", f.Hub.Kubeconfig)
	for _, c := range f.Managed {
		fmt.Fprintf(out, "  %-9s %s   (%s)\n", c.Name, c.Kubeconfig, labels(c.Labels))
	}
	fmt.Fprintf(out, "\nThe hub, OCM's placement controller and a spoke addon per cluster are running. The policy\n"+
		"%s makes namespace regent-sample on every cluster, enforced on the dev group first,\n"+
		"then on prod once dev is Compliant and has soaked 15s. Watch the rollout:\n", SamplePolicy)
	fmt.Fprintf(out, "  %s --kubeconfig %s get plc -A -w\n", kubectl, f.Hub.Kubeconfig)
	fmt.Fprintf(out, "\ntry:\n")
	fmt.Fprintf(out, "  %s --kubeconfig %s get managedclusters --show-labels\n", kubectl, f.Hub.Kubeconfig)
	fmt.Fprintf(out, "  %s --kubeconfig %s get placementdecisions -n policies --show-labels\n", kubectl, f.Hub.Kubeconfig)
	fmt.Fprintf(out, "  %s --kubeconfig %s get configurationpolicies -A\n", kubectl, f.Managed[0].Kubeconfig)
	fmt.Fprintf(out, "  %s --kubeconfig %s get clusteradmissionpolicies,policyrevisions -A\n", kubectl, f.Managed[0].Kubeconfig)
	fmt.Fprintf(out, "  %s --kubeconfig %s get plc no-privileged-pods -n policies -o jsonpath='{.status.status}'\n", kubectl, f.Hub.Kubeconfig)
	fmt.Fprintf(out, "\npolicies/no-privileged-pods puts a ClusterAdmissionPolicy on every cluster, served by two\n"+
		"policy-server replicas each; a privileged pod is rejected:\n")
	fmt.Fprintf(out, "  %s --kubeconfig %s run privileged --image=nginx:1.27 --privileged\n", kubectl, f.Managed[0].Kubeconfig)
	fmt.Fprintf(out, "and the hub shows, per cluster, which replicas serve the policy:\n")
	fmt.Fprintf(out, "  %s --kubeconfig %s get plc -n %s policies.no-privileged-pods -o jsonpath='{.status.details[0].history[0].message}'\n",
		kubectl, f.Hub.Kubeconfig, f.Managed[0].Name)
	fmt.Fprintf(out, "\nThe fleet dashboard (rollouts, compliance, reports; its certificate's CA is %s):\n  %s\n", board.CAFile, board.URL)
	fmt.Fprintf(out, "sign in with a token of the ServiceAccount %s/%s, allowed to look:\n", metav1.NamespaceDefault, DashboardViewer)
	fmt.Fprintf(out, "  %s --kubeconfig %s create token %s -n %s\n", kubectl, f.Hub.Kubeconfig, DashboardViewer, metav1.NamespaceDefault)
	fmt.Fprintf(out, "\nA process that dies is started again, as its Deployment would be; PIDs are in %s.\n"+
		"Kill the hub mid-rollout and watch the rollout resume where it was:\n", filepath.Join(f.Dir, "run"))
	fmt.Fprintf(out, "  kill -9 $(cat %s)\n", filepath.Join(f.Dir, "run", "regent-hub.pid"))
	fmt.Fprintf(out, "\nlogs of Regent's processes and OCM's placement controller: %s\n", filepath.Join(f.Dir, "logs"))
	fmt.Fprintf(out, "logs of every apiserver, etcd and controller manager: %s\n", filepath.Join(f.Dir, "<cluster>", "logs"))
	fmt.Fprintf(out, "press Ctrl-C to stop and clean up\n")
}

func labels(l map[string]string) string {
	var parts []string
	for _, k := range []string{"environment", "region"} {
		if v, ok := l[k]; ok {
			parts = append(parts, k+"="+v)
		}
	}
	return strings.Join(parts, ",")
}
