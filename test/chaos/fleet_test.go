package chaos

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	spokeaddon "regent.dev/regent/spoke-addon"
)

// envInt reads a test's size from the environment: CI runs the default, docs/reliability.md's
// figures come from larger values.
func envInt(t testing.TB, name string, def int64) int64 {
	t.Helper()
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, v, err)
	}
	return n
}

// hubProcess is `regent hub` as a separate process the test kills with SIGKILL and starts again.
type hubProcess struct {
	f     *fleet.Fleet
	proc  *fleet.Process
	runs  int
	kills int
}

func (h *hubProcess) start() error {
	p, err := h.f.StartProcess("regent-hub", regentBin, "hub", "--kubeconfig", h.f.Hub.Kubeconfig, "--metrics-bind-address", "0")
	if err != nil {
		return err
	}
	h.proc = p
	h.runs++
	return nil
}

// kill9 ends the hub with SIGKILL, keeping its log for a failure's report.
func (h *hubProcess) kill9() error {
	h.proc.Kill()
	if st := h.proc.State(); st == nil || st.String() != "signal: killed" {
		return fmt.Errorf("the hub (pid %d) ended with %v, not SIGKILL: it had died before (log: %s)", h.proc.PID(), st, h.proc.Log)
	}
	h.kills++
	return os.Rename(h.proc.Log, strings.TrimSuffix(h.proc.Log, ".log")+"."+strconv.Itoa(h.runs)+".log")
}

// deploy runs OCM's placement controller, `regent hub` and, unless addons is false, a
// `regent spoke-addon` per cluster on f.
func deploy(t testing.TB, f *fleet.Fleet, addons bool) *hubProcess {
	t.Helper()
	if _, err := f.StartPlacementController(""); err != nil {
		t.Fatal(err)
	}
	h := &hubProcess{f: f}
	if err := h.start(); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.Managed {
		if addons {
			startAddon(t, f, c, "", "")
		}
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, f)
		}
	})
	return h
}

// startAddon runs `regent spoke-addon` for cluster c with its own hub identity; hubAddr and
// localAddr, when set, replace the host:port it dials for the hub and for its own apiserver (a
// cutProxy in front of each); extra are more flags.
func startAddon(t testing.TB, f *fleet.Fleet, c *fleet.Cluster, hubAddr, localAddr string, extra ...string) *fleet.Process {
	t.Helper()
	identity, err := spokeaddon.IssueHubIdentity(context.Background(), f.Hub.Config, c.Name, 3600)
	if err != nil {
		t.Fatal(err)
	}
	hubKubeconfig := filepath.Join(c.Dir, "hub-identity.kubeconfig")
	if err := fleet.WriteKubeconfig(hubKubeconfig, through(identity, hubAddr)); err != nil {
		t.Fatal(err)
	}
	localKubeconfig := c.Kubeconfig
	if localAddr != "" {
		localKubeconfig = filepath.Join(c.Dir, "addon-local.kubeconfig")
		if err := fleet.WriteKubeconfig(localKubeconfig, through(c.Config, localAddr)); err != nil {
			t.Fatal(err)
		}
	}
	args := append([]string{"spoke-addon", "--hub-kubeconfig", hubKubeconfig,
		"--kubeconfig", localKubeconfig, "--cluster-name", c.Name, "--metrics-bind-address", "0"}, extra...)
	p, err := f.StartProcess("regent-spoke-addon-"+c.Name, regentBin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// through is cfg dialling addr instead of its host (the apiserver's certificate is for the
// loopback IP, whatever the port).
func through(cfg *rest.Config, addr string) *rest.Config {
	if addr == "" {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	cfg.Host = "https://" + addr
	return cfg
}

// hostPort is the host:port cfg dials.
func hostPort(t testing.TB, cfg *rest.Config) string {
	t.Helper()
	u, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	return u.Host
}

// localClients are clients of every managed cluster's own apiserver, by cluster name.
func localClients(t testing.TB, f *fleet.Fleet) map[string]client.Client {
	t.Helper()
	out := map[string]client.Client{}
	for _, c := range f.Managed {
		out[c.Name] = newClient(t, c)
	}
	return out
}

func newClient(t testing.TB, c *fleet.Cluster) client.WithWatch {
	t.Helper()
	cl, err := client.NewWithWatch(c.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// apply creates each YAML document on the cluster c talks to.
func apply(t testing.TB, c client.Client, docs ...string) {
	t.Helper()
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if err := c.Create(context.Background(), obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

func dumpLogs(t testing.TB, f *fleet.Fleet) {
	fleettest.DumpLogs(t, f.Dir, 3000, "logs/regent-*.log")
}
