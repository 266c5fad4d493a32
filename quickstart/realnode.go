package quickstart

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/image"
	"regent.dev/regent/version"
)

// RealNodeCluster is the managed cluster that gets a real node with --real-node: the dev
// cluster, where the sample rollout starts.
const RealNodeCluster = "cluster1"

// nodeImage is the one image the real node imports (nothing is pulled): this regent binary
// running `regent quickstart pause`, both the pods' sandbox and the demo workload.
var nodeImage = "regent.dev/quickstart:" + version.Version()

// workloadTaint keeps the node for the demo's pods: the PolicyServer's StatefulSet stays
// Pending there as on the clusters without a node, since its replicas run as processes here.
var workloadTaint = corev1.Taint{Key: "regent.dev/quickstart", Value: "workloads", Effect: corev1.TaintEffectNoSchedule}

// CheckRealNode says what this machine lacks for --real-node: what fleet.CheckRealNode names
// (root, Debian's containerd, runc, CNI plugins, iptables, conntrack, the kubenode binary), and
// a static regent binary, since the node's pods run it with no libc beside it.
func CheckRealNode(binDir, self string) error {
	errs := []error{fleet.CheckRealNode(binDir)}
	if err := staticBinary(self); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("--real-node: %w", err)
	}
	return nil
}

// staticBinary fails for an executable that needs a dynamic loader (a cgo build).
func staticBinary(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s is dynamically linked; the node's pods run it without libc: build it with CGO_ENABLED=0 (make build does)", path)
		}
	}
	return nil
}

// writeNodeImage builds nodeImage from self into a tarball under dir for the node to import.
func writeNodeImage(dir, self string) (string, error) {
	img, err := image.Build(image.Spec{Binary: self, Path: "/usr/local/bin/regent",
		Entrypoint: []string{"/usr/local/bin/regent", "quickstart", "pause"},
		Created:    time.Unix(0, 0), Version: version.Version(), NoCACertificates: true})
	if err != nil {
		return "", fmt.Errorf("node image: %w", err)
	}
	tarball := filepath.Join(dir, "quickstart-image.tar")
	if err := image.WriteTarball(tarball, nodeImage, img); err != nil {
		return "", fmt.Errorf("node image: %w", err)
	}
	return tarball, nil
}

// taintNode reserves c's node for the demo's pods (workloadTaint).
func taintNode(ctx context.Context, c *fleet.Cluster) error {
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	// The node lifecycle controller edits the taints too (the not-ready one it lifts).
	err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		node := &corev1.Node{}
		if err := cl.Get(ctx, types.NamespacedName{Name: c.Node.Name}, node); err != nil {
			return err
		}
		node.Spec.Taints = append(node.Spec.Taints, workloadTaint)
		return cl.Update(ctx, node)
	})
	if err != nil {
		return fmt.Errorf("taint node %s: %w", c.Node.Name, err)
	}
	return nil
}

// showRealNode demonstrates what the node makes real, and prints it: a privileged pod refused by
// the policy server's webhook once no-privileged-pods is active on the cluster, and an allowed
// pod scheduled onto the node and Running there.
func showRealNode(ctx context.Context, out io.Writer, c *fleet.Cluster, within time.Duration) error {
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	refusal, err := untilRefused(ctx, cl)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "\nreal node %s of %s: a privileged pod is refused by the policy server's webhook:\n  %s\n", c.Node.Name, c.Name, refusal)
	allowed := demoPod("quickstart-allowed", false)
	if err := cl.Create(ctx, allowed); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("the allowed pod on %s was refused: %w", c.Name, err)
	}
	for {
		p := &corev1.Pod{}
		err := cl.Get(ctx, client.ObjectKeyFromObject(allowed), p)
		if err == nil && p.Status.Phase == corev1.PodRunning {
			fmt.Fprintf(out, "real node %s: pod %s/%s is Running on it (image %s, pod IP %s)\n", p.Spec.NodeName, p.Namespace, p.Name, nodeImage, p.Status.PodIP)
			fmt.Fprintf(out, "  kubectl --kubeconfig %s get nodes,pods -o wide\n", c.Kubeconfig)
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("pod %s/%s on %s is not Running after %s: %v %s (node logs: %s)", allowed.Namespace, allowed.Name, c.Name, within, err, podState(p), filepath.Join(c.Node.Dir, "logs"))
		}
		sleep(ctx, time.Second)
	}
}

// untilRefused tries a privileged pod until the webhook refuses it (the policy reaches the cluster
// through the rollout and the policy servers load it first); a pod admitted before that is removed.
func untilRefused(ctx context.Context, cl client.Client) (string, error) {
	for {
		pod := demoPod("quickstart-privileged", true)
		err := cl.Create(ctx, pod)
		if err == nil {
			_ = cl.Delete(ctx, pod, client.GracePeriodSeconds(0))
		} else if strings.Contains(err.Error(), "is privileged") {
			return err.Error(), nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("no-privileged-pods did not refuse a privileged pod in time (last answer: %v)", err)
		}
		sleep(ctx, 2*time.Second)
	}
}

func demoPod(name string, privileged bool) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "app", Image: nodeImage, ImagePullPolicy: corev1.PullNever,
			SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(privileged)}}},
		Tolerations:                   []corev1.Toleration{{Key: workloadTaint.Key, Operator: corev1.TolerationOpEqual, Value: workloadTaint.Value, Effect: workloadTaint.Effect}},
		TerminationGracePeriodSeconds: ptr.To[int64](1),
	}}
}

func podState(p *corev1.Pod) string {
	s := string(p.Status.Phase)
	for _, cs := range p.Status.ContainerStatuses {
		if cs.State.Waiting != nil {
			s += " " + cs.State.Waiting.Reason + ": " + cs.State.Waiting.Message
		}
	}
	return s
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
