package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Node is a real Kubernetes node of a managed cluster: a private containerd (root, state,
// socket and config under Dir), a kubelet registered as Name, kube-proxy in iptables mode (pods
// reach the `kubernetes` Service) and kube-scheduler. Pods run from images imported into its
// containerd; nothing is pulled.
type Node struct {
	// Name is the Node object's name.
	Name string
	// Dir holds containerd's and the kubelet's data, the configs and the node's logs.
	Dir string

	cluster    *Cluster
	kubenode   string
	ctr        string
	cgroupRoot string
	procs      []*Process // kubelet, kube-proxy, kube-scheduler, then containerd: stopped in order
}

// nodeOptions are the fleet options a node needs.
type nodeOptions struct {
	binDir       string
	images       []string
	pauseImage   string
	readyTimeout time.Duration
}

// startNode brings up the node of cluster c and waits until its Node is Ready.
func startNode(ctx context.Context, c *Cluster, opts nodeOptions) (*Node, error) {
	n := &Node{Name: c.Name + "-node", Dir: filepath.Join(c.Dir, "node"), cluster: c,
		// Unique per fleet and cluster, so two fleets' pods never share a cgroup tree.
		cgroupRoot: filepath.Base(filepath.Dir(c.Dir)) + "-" + c.Name}
	var err error
	if n.kubenode, err = Binary(opts.binDir, "kubenode"); err != nil {
		return nil, err
	}
	if n.ctr, err = lookPath("ctr"); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(n.Dir, 0o700); err != nil {
		return nil, err
	}
	state, _ := json.Marshal(nodeState{CgroupRoot: n.cgroupRoot, Kubenode: n.kubenode, Sysctls: readSysctls()})
	if err := os.WriteFile(n.path(nodeStateFile), state, 0o600); err != nil {
		return nil, err
	}
	if err := n.start(ctx, opts); err != nil {
		return nil, errors.Join(fmt.Errorf("node %s (logs in %s): %w", n.Name, n.path("logs"), err), n.stop())
	}
	return n, nil
}

func (n *Node) start(ctx context.Context, opts nodeOptions) error {
	if err := createCgroupRoot(n.cgroupRoot); err != nil {
		return err
	}
	kubeletPort, err := FreePort(podGateway)
	if err != nil {
		return err
	}
	if err := n.writeConfigs(opts.pauseImage, kubeletPort, n.cluster.Kubeconfig); err != nil {
		return err
	}
	containerd, err := lookPath("containerd")
	if err != nil {
		return err
	}
	if err := n.run("containerd", containerd, "--config", n.path("containerd", "config.toml")); err != nil {
		return err
	}
	if err := n.waitContainerd(ctx); err != nil {
		return err
	}
	for _, img := range opts.images {
		if err := n.ImportImage(ctx, img); err != nil {
			return err
		}
	}
	if err := n.run("kubelet", n.kubenode, "kubelet", "--config="+n.path("kubelet.yaml"),
		"--kubeconfig="+n.cluster.Kubeconfig, "--root-dir="+n.path("kubelet"),
		"--hostname-override="+n.Name, "--node-ip="+podGateway); err != nil {
		return err
	}
	if err := n.run("kube-proxy", n.kubenode, "kube-proxy", "--config="+n.path("proxy.yaml")); err != nil {
		return err
	}
	if err := n.run("kube-scheduler", n.kubenode, "kube-scheduler", "--kubeconfig="+n.cluster.Kubeconfig,
		"--leader-elect=false", "--secure-port=0"); err != nil {
		return err
	}
	if err := n.waitReady(ctx, opts.readyTimeout); err != nil {
		return err
	}
	return n.createVolumes(ctx)
}

// run starts one of the node's programs, its output in the node's logs folder. The programs
// are not the fleet's extra processes: the cluster stops them, before its apiserver.
func (n *Node) run(name, bin string, args ...string) error {
	p, err := startProcess(n.path("logs"), name, bin, nil, args...)
	if err != nil {
		return err
	}
	// Stop order is kubelet, kube-proxy, kube-scheduler, containerd: the kubelet must not
	// restart what cleanup kills, and containerd goes last.
	if name == "containerd" {
		n.procs = append(n.procs, p)
	} else {
		n.procs = append([]*Process{p}, n.procs...)
	}
	return nil
}

func (n *Node) waitContainerd(ctx context.Context) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.CommandContext(ctx, n.ctr, "--address", n.socket(), "version").CombinedOutput()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("containerd did not answer on %s: %w: %s", n.socket(), err, tail(out))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ImportImage loads an image tarball into the node's containerd, in the namespace the kubelet's
// CRI uses, so pods run it with imagePullPolicy IfNotPresent and no registry.
func (n *Node) ImportImage(ctx context.Context, tarball string) error {
	out, err := exec.CommandContext(ctx, n.ctr, "--address", n.socket(), "-n", "k8s.io", "images", "import", tarball).CombinedOutput()
	if err != nil {
		return fmt.Errorf("import %s into %s: %w: %s", tarball, n.Name, err, tail(out))
	}
	return nil
}

func (n *Node) waitReady(ctx context.Context, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(n.cluster.Config)
	if err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	last := "not registered"
	for {
		for _, p := range n.procs {
			select {
			case <-p.Done():
				return fmt.Errorf("%s exited: %s", p.Name, tail(readFile(p.Log)))
			default:
			}
		}
		node, err := cs.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err == nil {
			for _, cond := range node.Status.Conditions {
				if cond.Type == corev1.NodeReady {
					if cond.Status == corev1.ConditionTrue {
						return nil
					}
					last = cond.Reason + ": " + cond.Message
				}
			}
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("node %s not Ready after %s (%s)", n.Name, timeout, last)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// stop ends the node's programs and removes every trace of its pods from the host.
func (n *Node) stop() error {
	for _, p := range n.procs {
		p.Stop(10 * time.Second)
	}
	return cleanupNode(n.Dir)
}

// createCgroupRoot makes the node's cgroup in every v1 hierarchy (the kubelet refuses a cgroup
// root that does not exist), with cpuset's CPUs and memory nodes copied from the parent: a new
// v1 cpuset cgroup starts with none and no process could join it.
func createCgroupRoot(root string) error {
	hierarchies, err := os.ReadDir(cgroupMount)
	if err != nil {
		return fmt.Errorf("cgroups: %w", err)
	}
	for _, h := range hierarchies {
		parent := filepath.Join(cgroupMount, h.Name())
		if _, err := os.Stat(filepath.Join(parent, "cgroup.procs")); err != nil {
			continue // not a mounted hierarchy (e.g. a symlink such as cpu,cpuacct)
		}
		dir := filepath.Join(parent, root)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("create cgroup %s: %w", dir, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if v, err := os.ReadFile(filepath.Join(parent, f)); err == nil {
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("cgroup %s %s: %w", dir, f, err)
				}
			}
		}
	}
	return nil
}

func readFile(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}
