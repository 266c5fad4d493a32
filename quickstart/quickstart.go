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

	"regent.dev/regent/fleet"
)

// Clusters are the quickstart's managed clusters: two environments across two regions, so a
// Placement can pick by either.
var Clusters = []fleet.ClusterSpec{
	{Name: "cluster1", Labels: map[string]string{"environment": "dev", "region": "emea"}},
	{Name: "cluster2", Labels: map[string]string{"environment": "prod", "region": "emea"}},
	{Name: "cluster3", Labels: map[string]string{"environment": "prod", "region": "apac"}},
}

// Options configure a quickstart run.
type Options struct {
	// BinDir holds the fleet's binaries; fleet.DefaultBinDir when empty.
	BinDir string
	// TestbinScript builds missing binaries; run when they are missing and it exists.
	TestbinScript string
	// Lifetime stops the fleet by itself after this long; 0 waits for ctx.
	Lifetime time.Duration
	// Out receives what a user reads.
	Out io.Writer
}

// Run starts the fleet, prints how to use it, waits for ctx (Ctrl-C) or the lifetime, and stops.
func Run(ctx context.Context, opts Options) error {
	if opts.BinDir == "" {
		opts.BinDir = fleet.DefaultBinDir()
	}
	if opts.Out == nil {
		opts.Out = os.Stdout
	}
	if err := ensureBinaries(ctx, opts); err != nil {
		return err
	}
	f, err := fleet.Start(ctx, fleet.Options{Managed: Clusters, BinDir: opts.BinDir, Log: opts.Out})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Fprintln(opts.Out, "stopping the fleet")
		if err := f.Stop(); err != nil {
			fmt.Fprintln(opts.Out, "stop:", err)
		}
	}()
	printGuide(opts.Out, f, opts.BinDir)

	var timeout <-chan time.Time
	if opts.Lifetime > 0 {
		timeout = time.After(opts.Lifetime)
	}
	select {
	case <-ctx.Done():
	case <-timeout:
	}
	return nil
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

func printGuide(out io.Writer, f *fleet.Fleet, binDir string) {
	kubectl := "kubectl"
	if p, err := fleet.Binary(binDir, "kubectl"); err == nil {
		kubectl = p
	}
	fmt.Fprintf(out, "\nRegent quickstart fleet is up.\n\nkubeconfigs:\n")
	fmt.Fprintf(out, "  %-9s %s\n", "hub", f.Hub.Kubeconfig)
	for _, c := range f.Managed {
		fmt.Fprintf(out, "  %-9s %s   (%s)\n", c.Name, c.Kubeconfig, labels(c.Labels))
	}
	fmt.Fprintf(out, "\ntry:\n")
	fmt.Fprintf(out, "  %s --kubeconfig %s get managedclusters --show-labels\n", kubectl, f.Hub.Kubeconfig)
	fmt.Fprintf(out, "  %s --kubeconfig %s get plc -A\n", kubectl, f.Hub.Kubeconfig)
	fmt.Fprintf(out, "  %s --kubeconfig %s get namespaces\n", kubectl, f.Managed[0].Kubeconfig)
	fmt.Fprintf(out, "\nlogs of every apiserver, etcd and controller manager: %s\n", filepath.Join(f.Dir, "<cluster>", "logs"))
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
