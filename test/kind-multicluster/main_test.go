package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/quickstart"
	spokeaddon "regent.dev/regent/spoke-addon"
)

// regentBin is the regent binary built for this run.
var regentBin string

func TestMain(m *testing.M) {
	where, err := target()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	dir, err := os.MkdirTemp("", "regent-e2e-bin-")
	if err != nil {
		panic(err)
	}
	if where == "kind" {
		if tools, err = kindSetup(context.Background(), dir); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.RemoveAll(dir)
			os.Exit(2)
		}
	}
	regentBin = filepath.Join(dir, "regent")
	build := exec.Command("go", "build", "-o", regentBin, "regent.dev/regent/cmd/regent")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "build regent:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// env is a running fleet with Regent deployed on it.
type env struct {
	fleet         *fleet.Fleet
	hub           client.Client
	local         map[string]client.Client
	addons        map[string]*fleet.Process
	policyServers map[string]*quickstart.LocalPolicyServer
	hubPID        int
}

// deploy starts a hub and the given managed clusters, OCM's placement controller, `regent hub`
// and a `regent spoke-addon` per cluster with its production hub identity.
func deploy(t testing.TB, clusters ...fleet.ClusterSpec) *env {
	t.Helper()
	return deployWithPolicyServers(t, 0, clusters...)
}

// deployWithPolicyServers also runs, on every cluster, PolicyServer "default" with the given
// number of replicas as processes, and points the addon's webhooks at them.
func deployWithPolicyServers(t testing.TB, replicas int, clusters ...fleet.ClusterSpec) *env {
	t.Helper()
	if kindMode() {
		return deployKind(t, replicas, clusters...)
	}
	f := fleettest.Start(t, fleet.Options{Managed: clusters})
	e := &env{fleet: f, hub: newClient(t, f.Hub), local: map[string]client.Client{}, addons: map[string]*fleet.Process{},
		policyServers: map[string]*quickstart.LocalPolicyServer{}}
	if _, err := f.StartPlacementController(""); err != nil {
		t.Fatal(err)
	}
	hubProc, err := f.StartProcess("regent-hub", regentBin, "hub", "--kubeconfig", f.Hub.Kubeconfig, "--metrics-bind-address", "0")
	if err != nil {
		t.Fatal(err)
	}
	e.hubPID = hubProc.PID()
	for _, c := range f.Managed {
		identity, err := spokeaddon.IssueHubIdentity(context.Background(), f.Hub.Config, c.Name, 3600)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(c.Dir, "hub-identity.kubeconfig")
		if err := fleet.WriteKubeconfig(path, identity); err != nil {
			t.Fatal(err)
		}
		args := []string{"spoke-addon", "--hub-kubeconfig", path,
			"--kubeconfig", c.Kubeconfig, "--cluster-name", c.Name, "--metrics-bind-address", "0"}
		if replicas > 0 {
			ps, err := quickstart.StartPolicyServer(context.Background(), f, c, regentBin, replicas)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = ps.Close() })
			e.policyServers[c.Name] = ps
			args = append(args, "--policy-server-url", ps.URL, "--policy-server-ca", ps.CAFile)
		}
		p, err := f.StartProcess("regent-spoke-addon-"+c.Name, regentBin, args...)
		if err != nil {
			t.Fatal(err)
		}
		e.addons[c.Name] = p
		e.local[c.Name] = newClient(t, c)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, f)
		}
	})
	return e
}

func newClient(t testing.TB, c *fleet.Cluster) client.Client {
	t.Helper()
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// apply creates each object of a multi-document YAML on the hub.
func (e *env) apply(t testing.TB, docs ...string) {
	t.Helper()
	for _, doc := range docs {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if err := e.hub.Create(context.Background(), obj); err != nil {
			t.Fatalf("create %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// eventually is fleettest.Eventually: poll until the condition holds or fail saying why.
var eventually = fleettest.Eventually

func dumpLogs(t testing.TB, f *fleet.Fleet) {
	fleettest.DumpLogs(t, f.Dir, 4000, "logs/regent-*.log")
}

func objectMeta(name string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: name} }
