package fleet

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"regent.dev/regent/api/crds"
)

// ClusterSpec describes a managed cluster to start.
type ClusterSpec struct {
	Name   string
	Labels map[string]string
	// RealNode gives the cluster a real node (containerd, kubelet, kube-proxy, kube-scheduler and
	// the workload controllers) that runs pods; it needs root and the packages CheckRealNode
	// names. At most one per host.
	RealNode bool
}

// Options configure a fleet.
type Options struct {
	// Managed are the managed clusters; none gives a hub alone.
	Managed []ClusterSpec
	// BinDir holds kube-apiserver, etcd and kube-controller-manager; DefaultBinDir when empty.
	BinDir string
	// TempDir is where the fleet's root folder is created; os.TempDir() when empty.
	TempDir string
	// Log receives progress lines; discarded when nil.
	Log io.Writer
	// OCMAgents runs OCM's own hub controllers (registration, addon manager, addon conversion
	// webhook) and, per managed cluster, OCM's registration and work agents from the `ocm` test
	// binary: clusters join with a bootstrap token and a CSR the hub's kube-controller-manager
	// signs, and ManifestWorks are applied for real. Without it the fleet creates the
	// ManagedClusters itself (faster; no agent runs).
	OCMAgents bool
	// NodeImages are image tarballs imported into every real node's containerd before its
	// kubelet starts; PauseImage, the reference of one of them, is the pods' sandbox image.
	NodeImages []string
	PauseImage string
	// NodeReadyTimeout bounds a real node's start; 3 minutes when zero.
	NodeReadyTimeout time.Duration
}

// Fleet is a running hub with its managed clusters.
type Fleet struct {
	Hub     *Cluster
	Managed []*Cluster
	// Dir is the fleet's root folder, removed by Stop.
	Dir string

	mu    sync.Mutex
	extra []*Process // programs started beside the clusters, stopped first
}

// Start brings up the hub and every managed cluster in parallel, installs the CRDs and registers
// the managed clusters on the hub. On error nothing is left running.
func Start(ctx context.Context, opts Options) (*Fleet, error) {
	if opts.BinDir == "" {
		opts.BinDir = DefaultBinDir()
	}
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if opts.NodeReadyTimeout == 0 {
		opts.NodeReadyTimeout = 3 * time.Minute
	}
	if err := CheckBinaries(opts.BinDir); err != nil {
		return nil, err
	}
	if opts.TempDir == "" {
		opts.TempDir = os.TempDir()
	}
	if err := validate(opts); err != nil {
		return nil, err
	}
	if realNode(opts.Managed) {
		if err := CheckRealNode(opts.BinDir); err != nil {
			return nil, err
		}
	}
	SweepOrphans(opts.TempDir)
	root, err := os.MkdirTemp(opts.TempDir, rootPrefix)
	if err != nil {
		return nil, err
	}
	f := &Fleet{Dir: root, Managed: make([]*Cluster, len(opts.Managed))}
	if err := f.start(ctx, opts); err != nil {
		return nil, errors.Join(err, f.Stop())
	}
	return f, nil
}

func (f *Fleet) start(ctx context.Context, opts Options) error {
	if err := writeOwner(f.Dir); err != nil {
		return err
	}
	wrapDir := filepath.Join(f.Dir, "bin")
	if err := writeDeathWrappers(opts.BinDir, wrapDir); err != nil {
		return err
	}
	all, err := crds.All()
	if err != nil {
		return err
	}
	own, err := crds.Regent()
	if err != nil {
		return err
	}
	hubCRDs, spokeCRDs := all, own
	var ocm *ocmHub
	var ca *clientCA
	if opts.OCMAgents {
		if ocm, err = prepareOCMHub(f.Dir, opts.BinDir); err != nil {
			return err
		}
		if ca, err = newClientCA(); err != nil {
			return err
		}
		if hubCRDs, spokeCRDs, err = ocmCRDs(all, own); err != nil {
			return err
		}
	}
	began := time.Now()
	fmt.Fprintf(opts.Log, "starting hub and %d managed clusters in %s\n", len(opts.Managed), f.Dir)
	// With a real node, the hub serves where pods reach it (the pod bridge's gateway): the
	// spoke addon runs in a pod there.
	var hubServing servingOptions
	if realNode(opts.Managed) {
		if err := os.WriteFile(filepath.Join(f.Dir, bridgeMarker), nil, 0o600); err != nil {
			return err
		}
		if err := createBridge(f.Dir, filepath.Join(opts.BinDir, "kubenode")); err != nil {
			return err
		}
		hubServing.address = NodeAddress
	}
	var g errgroup.Group
	g.Go(func() error {
		c, err := startCluster(ctx, "hub", filepath.Join(f.Dir, "hub"), opts.BinDir, wrapDir, hubCRDs, hubServing, ca)
		f.Hub = c
		return err
	})
	for i, spec := range opts.Managed {
		g.Go(func() error {
			var serving servingOptions
			if spec.RealNode {
				serving = servingOptions{address: NodeAddress, pods: true}
			}
			c, err := startCluster(ctx, spec.Name, filepath.Join(f.Dir, spec.Name), opts.BinDir, wrapDir, spokeCRDs, serving, nil)
			if c != nil {
				c.Labels = spec.Labels
			}
			f.Managed[i] = c
			if err != nil || !spec.RealNode {
				return err
			}
			nodeBegan := time.Now()
			c.Node, err = startNode(ctx, c, nodeOptions{binDir: opts.BinDir, images: opts.NodeImages,
				pauseImage: opts.PauseImage, readyTimeout: opts.NodeReadyTimeout})
			if err == nil {
				fmt.Fprintf(opts.Log, "node %s Ready in %s\n", c.Node.Name, time.Since(nodeBegan).Round(100*time.Millisecond))
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return err
	}
	if err := installAdmission(ctx, f.Hub.Config); err != nil {
		return err
	}
	if ocm != nil {
		if err := f.startOCMHub(ctx, ocm); err != nil {
			return err
		}
		var joins errgroup.Group
		for _, c := range f.Managed {
			joins.Go(func() error { return f.joinOCM(ctx, ocm, c) })
		}
		if err := joins.Wait(); err != nil {
			return err
		}
	} else {
		for _, c := range f.Managed {
			if err := register(ctx, f.Hub.Config, c); err != nil {
				return err
			}
		}
	}
	fmt.Fprintf(opts.Log, "fleet up in %s\n", time.Since(began).Round(100*time.Millisecond))
	return nil
}

func validate(opts Options) error {
	seen := map[string]bool{"hub": true, "bin": true}
	nodes := 0
	for _, s := range opts.Managed {
		if s.Name == "" || seen[s.Name] {
			return fmt.Errorf("managed cluster name %q is empty, reserved or repeated", s.Name)
		}
		seen[s.Name] = true
		if s.RealNode {
			nodes++
		}
	}
	if nodes > 1 {
		return fmt.Errorf("%d managed clusters ask for a real node; one per host (its kube-proxy owns the host's Service rules)", nodes)
	}
	if nodes == 1 && opts.PauseImage == "" {
		return errors.New("a real node needs Options.PauseImage, the sandbox image, imported through Options.NodeImages")
	}
	return nil
}

func realNode(specs []ClusterSpec) bool {
	for _, s := range specs {
		if s.RealNode {
			return true
		}
	}
	return false
}

// Cluster returns the managed cluster with the given name, or nil.
func (f *Fleet) Cluster(name string) *Cluster {
	for _, c := range f.Managed {
		if c != nil && c.Name == name {
			return c
		}
	}
	return nil
}

// Stop ends every process of the fleet and removes its folder.
func (f *Fleet) Stop() error {
	var errs []error
	f.mu.Lock()
	extra := f.extra
	f.mu.Unlock()
	var stops errgroup.Group
	for _, p := range extra {
		stops.Go(func() error { p.Stop(10 * time.Second); return nil })
	}
	_ = stops.Wait()
	var g errgroup.Group
	for _, c := range append([]*Cluster{f.Hub}, f.Managed...) {
		if c != nil {
			g.Go(c.stop)
		}
	}
	errs = append(errs, g.Wait())
	// Whatever a failed stop left behind still names the root in its command line.
	killUsers(f.Dir)
	// A node that failed to start has no Cluster.Node to stop it; the bridge goes last.
	sweepNodes(f.Dir)
	errs = append(errs, os.RemoveAll(f.Dir))
	return errors.Join(errs...)
}

// PIDs lists the processes running for the fleet.
func (f *Fleet) PIDs() []int { return ProcessesUsing(f.Dir) }
