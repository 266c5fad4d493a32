package ocminstall

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// regentBin is the regent binary built for this run.
var regentBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "regent-ocm-install-bin-")
	if err != nil {
		panic(err)
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

var eventually = fleettest.Eventually

func newClient(t testing.TB, c *fleet.Cluster) client.Client {
	t.Helper()
	cl, err := client.New(c.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// apply creates each YAML document with c.
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

// dumpLogs shows the tail of every process log of a failed test: OCM's components and Regent's.
func dumpLogs(t testing.TB, f *fleet.Fleet) {
	fleettest.DumpLogs(t, f.Dir, 3000, "logs/*.log")
}
