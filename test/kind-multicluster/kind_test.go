package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	addonapiv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
)

// Pinned tools, installed with `go install` only when not already on PATH.
const (
	kindModule       = "sigs.k8s.io/kind@v0.30.0"
	clusteradmModule = "open-cluster-management.io/clusteradm/cmd/clusteradm@v1.0.2"
)

// kindTools are the commands kind mode drives, found or installed once per run.
type kindTools struct{ kind, clusteradm, kubectl string }

// kindSetup checks what kind mode needs before any test runs; TestMain exits non-zero with its
// error.
func kindSetup(ctx context.Context, binDir string) (*kindTools, error) {
	if err := kindPrerequisites(ctx); err != nil {
		return nil, err
	}
	k, err := kindTool(ctx, binDir, "kind", kindModule)
	if err != nil {
		return nil, err
	}
	adm, err := kindTool(ctx, binDir, "clusteradm", clusteradmModule)
	if err != nil {
		return nil, err
	}
	kubectl, err := exec.LookPath("kubectl")
	if err != nil {
		if kubectl, err = fleet.Binary(fleet.DefaultBinDir(), "kubectl"); err != nil {
			return nil, fmt.Errorf("kubectl: not on PATH and not in the test binaries (make testbin): %w", err)
		}
	}
	return &kindTools{kind: k, clusteradm: adm, kubectl: kubectl}, nil
}

// tools is set by TestMain in kind mode.
var tools *kindTools

// deployKind is deploy on kind: a hub and the given managed clusters as kind clusters, OCM
// installed and joined with clusteradm (registration, work and addon manager are OCM's own),
// Regent installed exactly as docs/install.md tells a user (deploy/crds and deploy/hub on the
// hub, the addon enabled per cluster), the image loaded into every node from `make image`.
func deployKind(t testing.TB, replicas int, clusters ...fleet.ClusterSpec) *env {
	t.Helper()
	if replicas > 0 {
		t.Skip("kind: this test drives policy-server replicas as local processes (killing them by PID); " +
			"on kind the PolicyServer runs as the addon's pods, so it runs on the local fleet only")
	}
	ctx := context.Background()
	dir := t.TempDir()
	hubName := "regent-e2e-hub"
	names := []string{hubName}
	for _, c := range clusters {
		names = append(names, "regent-e2e-"+c.Name)
	}
	var g errgroup.Group
	for _, n := range names {
		g.Go(func() error { return run(ctx, tools.kind, "create", "cluster", "--name", n, "--wait", "3m") })
	}
	t.Cleanup(func() {
		if os.Getenv("REGENT_E2E_KEEP") != "" {
			t.Logf("kind clusters kept (REGENT_E2E_KEEP): %v", names)
			return
		}
		for _, n := range names {
			_ = run(context.Background(), tools.kind, "delete", "cluster", "--name", n)
		}
	})
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	kubeconfigs := map[string]string{}
	for _, n := range names {
		out, err := output(ctx, tools.kind, "get", "kubeconfig", "--name", n)
		if err != nil {
			t.Fatal(err)
		}
		kubeconfigs[n] = filepath.Join(dir, n+".kubeconfig")
		if err := os.WriteFile(kubeconfigs[n], []byte(out), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hubKC := kubeconfigs[hubName]

	archive, err := imageArchive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		if err := run(ctx, tools.kind, "load", "image-archive", archive, "--name", n); err != nil {
			t.Fatal(err)
		}
	}

	// OCM, as its quick start does it.
	if err := run(ctx, tools.clusteradm, "init", "--wait", "--kubeconfig", hubKC); err != nil {
		t.Fatal(err)
	}
	tokenOut, err := output(ctx, tools.clusteradm, "get", "token", "--kubeconfig", hubKC)
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`--hub-token\s+(\S+)`).FindStringSubmatch(tokenOut)
	if m == nil {
		t.Fatalf("no --hub-token in `clusteradm get token`:\n%s", tokenOut)
	}
	hubURL := "https://" + hubName + "-control-plane:6443" // the hub as the other nodes reach it on kind's network
	for i, c := range clusters {
		n := names[i+1]
		if err := run(ctx, tools.clusteradm, "join", "--hub-token", m[1], "--hub-apiserver", hubURL,
			"--cluster-name", c.Name, "--wait", "--force-internal-endpoint-lookup", "--kubeconfig", kubeconfigs[n]); err != nil {
			t.Fatal(err)
		}
		if err := run(ctx, tools.clusteradm, "accept", "--clusters", c.Name, "--wait", "--kubeconfig", hubKC); err != nil {
			t.Fatal(err)
		}
	}

	e := &env{hub: kindClient(t, hubKC), local: map[string]client.Client{}}
	for i, c := range clusters {
		e.local[c.Name] = kindClient(t, kubeconfigs[names[i+1]])
		mc := &clusterv1.ManagedCluster{}
		if err := e.hub.Get(ctx, types.NamespacedName{Name: c.Name}, mc); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(mc.DeepCopy())
		if mc.Labels == nil {
			mc.Labels = map[string]string{}
		}
		for k, v := range c.Labels {
			mc.Labels[k] = v
		}
		if err := e.hub.Patch(ctx, mc, patch); err != nil {
			t.Fatal(err)
		}
	}

	// Regent, as docs/install.md tells a user.
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{"deploy/crds", "deploy/hub"} {
		if err := run(ctx, tools.kubectl, "--kubeconfig", hubKC, "apply", "--server-side", "-k", filepath.Join(root, base)); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range clusters {
		mca := &addonapiv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: "regent", Namespace: c.Name}}
		if err := e.hub.Create(ctx, mca); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 10*time.Minute, func() (bool, string) {
		for _, c := range clusters {
			mca := &addonapiv1beta1.ManagedClusterAddOn{}
			if err := e.hub.Get(ctx, types.NamespacedName{Namespace: c.Name, Name: "regent"}, mca); err != nil {
				return false, err.Error()
			}
			if !meta.IsStatusConditionTrue(mca.Status.Conditions, addonapiv1beta1.ManagedClusterAddOnConditionAvailable) {
				return false, fmt.Sprintf("%s: addon not Available: %+v", c.Name, mca.Status.Conditions)
			}
		}
		return true, ""
	})
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := output(context.Background(), tools.kubectl, "--kubeconfig", hubKC, "logs", "-n", "regent-system",
				"deploy/regent-hub", "--tail=200")
			t.Logf("--- regent-hub logs:\n%s", out)
		}
	})
	return e
}

func kindClient(t testing.TB, kubeconfig string) client.Client {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// imageArchive builds Regent's image with `make image` and returns the docker-save archive it
// writes, which `kind load image-archive` takes.
func imageArchive(ctx context.Context) (string, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, "make", "-s", "image")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("make image: %w\n%s", err, out)
	}
	return filepath.Join(root, "bin", "regent-image.tar"), nil
}

func repoRoot() (string, error) {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		return "", fmt.Errorf("module root: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func run(ctx context.Context, name string, args ...string) error {
	_, err := output(ctx, name, args...)
	return err
}

func output(ctx context.Context, name string, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out), nil
}
