package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonapiv1beta1 "open-cluster-management.io/api/addon/v1beta1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/yaml"

	"regent.dev/regent/addonidentity"
	"regent.dev/regent/hub/addon"
	"regent.dev/regent/policyserver/lifecycle"
)

// Every long-running subcommand answers health probes and can elect a leader, under the same
// flag names; the policy server, as Kubewarden's, answers probes on its HTTPS --addr and elects
// through --lifecycle --role, and its help says so. (quickstart runs a fleet on one machine:
// nothing probes it, and a second one is a second fleet, not a standby.)
func TestLongRunningSubcommandsHaveProbesAndLeaderElection(t *testing.T) {
	root := newRootCommand()
	for _, name := range []string{"hub", "spoke-addon", "reports-aggregator"} {
		cmd, _, err := root.Find([]string{name})
		if err != nil {
			t.Fatal(err)
		}
		for _, flag := range []string{"health-probe-bind-address", "leader-elect", "leader-election-namespace", "metrics-bind-address"} {
			if cmd.Flags().Lookup(flag) == nil {
				t.Errorf("regent %s has no --%s", name, flag)
			}
		}
	}
	ps, _, err := root.Find([]string{"policy-server"})
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"addr", "lifecycle", "role", "namespace", "policy-server", "metrics-bind-address"} {
		if ps.Flags().Lookup(flag) == nil {
			t.Errorf("regent policy-server has no --%s", flag)
		}
	}
	// What its help promises: probes beside admission, not on a probe address of their own, and
	// no --leader-elect to look for.
	for _, flag := range []string{"health-probe-bind-address", "leader-elect"} {
		if ps.Flags().Lookup(flag) != nil {
			t.Errorf("regent policy-server has --%s, which its help says it has not", flag)
		}
	}
	if role := ps.Flags().Lookup("role").DefValue; role != string(lifecycle.RoleAll) {
		t.Errorf("--role defaults to %q: a lone --lifecycle server must campaign for the Lease", role)
	}
	for _, promise := range []string{"/livez and /readyz are served on --addr", "Lease " + lifecycle.LeaderLeaseName("<--policy-server>"), "--role=replica never does"} {
		if !strings.Contains(strings.Join(strings.Fields(ps.Long), " "), promise) {
			t.Errorf("policy-server's help does not say %q", promise)
		}
	}
	if !strings.Contains(ps.Flags().Lookup("addr").Usage, "/readyz, /livez") {
		t.Errorf("--addr does not say it serves the probes: %q", ps.Flags().Lookup("addr").Usage)
	}
}

// Flags only the local fleet (quickstart, tests) passes stay out of --help and keep working.
func TestLocalFleetFlags_HiddenFromHelpButStillTaken(t *testing.T) {
	for _, c := range []struct{ command, flag, value string }{
		{"spoke-addon", "policy-server-url", "https://127.0.0.1:9443"},
		{"spoke-addon", "policy-server-ca", "/tmp/ca.pem"},
		{"quickstart", "testbin-script", ""},
	} {
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs([]string{c.command, "--help"})
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out.String(), "--"+c.flag) {
			t.Errorf("regent %s --help shows --%s", c.command, c.flag)
		}
		cmd, _, err := newRootCommand().Find([]string{c.command})
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags([]string{"--" + c.flag + "=" + c.value}); err != nil {
			t.Errorf("regent %s --%s: %v", c.command, c.flag, err)
			continue
		}
		if f := cmd.Flags().Lookup(c.flag); !f.Changed || f.Value.String() != c.value {
			t.Errorf("regent %s --%s=%s left %q", c.command, c.flag, c.value, f.Value.String())
		}
	}
}

// The arguments deploy/ (deploy/hub/placement-api's added to deploy/hub's), and the hub's addon
// manager give the binary are arguments it takes.
func TestShippedManifests_ArgumentsParse(t *testing.T) {
	var argv [][]string
	for _, file := range []string{"../../deploy/hub/deployment.yaml", "../../deploy/spoke/deployment.yaml"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		var d appsv1.Deployment
		if err := yaml.Unmarshal(b, &d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			argv = append(argv, c.Args)
		}
	}
	cluster := &clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: "cluster1"}}
	mca := &addonapiv1beta1.ManagedClusterAddOn{ObjectMeta: metav1.ObjectMeta{Name: addonidentity.AddonName, Namespace: "cluster1"}}
	objs, err := addon.AgentManifests(context.Background(), "", nil, cluster, mca)
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			for _, c := range d.Spec.Template.Spec.Containers {
				argv = append(argv, c.Args)
			}
		}
	}
	argv = append(argv, append(slices.Clone(argv[0]), componentArgs(t, "../../deploy/hub/placement-api/kustomization.yaml")...))
	if len(argv) < 4 || len(argv[len(argv)-1]) == len(argv[0]) {
		t.Fatalf("found the arguments of %d containers, want the hub's with and without deploy/hub/placement-api, deploy/spoke's and the delivered agent's", len(argv))
	}
	for _, args := range argv {
		if _, err := parseExample(append([]string{"regent"}, args...)); err != nil {
			t.Errorf("%q: %v", args, err)
		}
	}
}

// componentArgs are the arguments a kustomize component's JSON patches append to a container.
func componentArgs(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var k struct {
		Patches []struct{ Patch string }
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	var args []string
	for _, p := range k.Patches {
		var ops []struct {
			Op, Path string
			Value    any
		}
		if err := yaml.Unmarshal([]byte(p.Patch), &ops); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, op := range ops {
			if op.Op == "add" && strings.HasSuffix(op.Path, "/args/-") {
				args = append(args, fmt.Sprint(op.Value))
			}
		}
	}
	return args
}
