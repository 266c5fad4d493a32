package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// cliEnv makes the test binary act as the regent binary, so the quickstart runs as its own
// process and receives a real SIGINT.
const cliEnv = "REGENT_TEST_RUN_CLI"

func TestMain(m *testing.M) {
	if args := os.Getenv(cliEnv); args != "" {
		// The quickstart starts its own processes from this binary with their arguments.
		if len(os.Args) > 1 && !strings.HasPrefix(os.Args[1], "-test.") {
			os.Args[0] = "regent"
		} else {
			os.Args = append([]string{"regent"}, strings.Fields(args)...)
		}
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestQuickstart_ComesUpServesEveryKubeconfigAndStopsOnSIGINT(t *testing.T) {
	if err := fleet.CheckBinaries(fleet.DefaultBinDir()); err != nil {
		t.Fatal(err)
	}
	kubectl, err := fleet.Binary(fleet.DefaultBinDir(), "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), cliEnv+"=quickstart --lifetime 10m --testbin-script=")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	kubeconfigs := map[string]string{}
	var tries []string
	var fleetDir, dashboardURL, dashboardCA string
	scanner := bufio.NewScanner(stdout)
	for scanner.Scan() {
		line := scanner.Text()
		t.Log(line)
		fields := strings.Fields(line)
		switch {
		case strings.HasPrefix(line, "starting hub"):
			fleetDir = fields[len(fields)-1]
		case len(fields) >= 2 && strings.HasSuffix(fields[1], "/kubeconfig"):
			kubeconfigs[fields[0]] = fields[1]
		case len(fields) > 0 && fields[0] == kubectl && fields[len(fields)-1] != "-w":
			tries = append(tries, line)
		case len(fields) == 1 && strings.HasPrefix(fields[0], "https://") && strings.HasSuffix(fields[0], "/dashboard/"):
			dashboardURL = fields[0]
		case strings.HasPrefix(line, "The fleet dashboard"):
			dashboardCA = strings.TrimSuffix(fields[len(fields)-1], "):")
		}
		if strings.HasPrefix(line, "press Ctrl-C") {
			break
		}
	}
	go func() { // keep draining so the quickstart never blocks on a full pipe
		for scanner.Scan() {
			t.Log(scanner.Text())
		}
	}()
	if len(kubeconfigs) != 4 || len(tries) != 8 || fleetDir == "" || dashboardURL == "" || dashboardCA == "" {
		t.Fatalf("quickstart printed kubeconfigs %v, %d kubectl lines, fleet folder %q, dashboard %q (CA %q); want 4, 8, a folder and the dashboard",
			kubeconfigs, len(tries), fleetDir, dashboardURL, dashboardCA)
	}

	ctx := context.Background()
	for name, path := range kubeconfigs {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatalf("%s kubeconfig: %v", name, err)
		}
		c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.List(ctx, &corev1.NamespaceList{}); err != nil {
			t.Errorf("%s: list namespaces: %v", name, err)
		}
		if name == "hub" {
			mcs := &clusterv1.ManagedClusterList{}
			if err := c.List(ctx, mcs); err != nil || len(mcs.Items) != 3 {
				t.Errorf("hub: %d ManagedClusters (%v), want 3", len(mcs.Items), err)
			}
		}
	}
	// The sample policy rolls out to every cluster, dev first, through the real hub, placement
	// controller, spoke addons and ConfigurationPolicy controller.
	hubCfg, err := clientcmd.BuildConfigFromFlags("", kubeconfigs["hub"])
	if err != nil {
		t.Fatal(err)
	}
	hub, err := client.New(hubCfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		root := &policyv1.Policy{}
		err := hub.Get(ctx, types.NamespacedName{Namespace: "policies", Name: "sample-namespace"}, root)
		if err == nil && root.Status.RolloutStatus == policyv1.RolloutSucceeded && root.Status.ComplianceState == policyv1.Compliant && len(root.Status.Status) == 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("sample policy did not roll out to all clusters: %v %+v", err, root.Status)
		}
		time.Sleep(500 * time.Millisecond)
	}
	for name, path := range kubeconfigs {
		if name == "hub" {
			continue
		}
		cfg, _ := clientcmd.BuildConfigFromFlags("", path)
		c, _ := client.New(cfg, client.Options{Scheme: scheme.Scheme})
		if err := c.Get(ctx, types.NamespacedName{Name: "regent-sample"}, &corev1.Namespace{}); err != nil {
			t.Errorf("%s: the sample policy's namespace: %v", name, err)
		}
	}

	// The admission sample: every cluster's two policy-server replicas serve it, and the hub's
	// view names each replica.
	deadline = time.Now().Add(3 * time.Minute)
	for {
		replica := &policyv1.Policy{}
		err := hub.Get(ctx, types.NamespacedName{Namespace: "cluster1", Name: "policies.no-privileged-pods"}, replica)
		msg := ""
		if err == nil && len(replica.Status.Details) == 1 && len(replica.Status.Details[0].History) > 0 {
			msg = replica.Status.Details[0].History[0].Message
		}
		if replica.Status.ComplianceState == policyv1.Compliant && strings.Contains(msg, "Ready on replica 0=True") &&
			strings.Contains(msg, "Ready on replica 1=True") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no-privileged-pods not served on cluster1 as the hub sees it: %v %q", err, msg)
		}
		time.Sleep(500 * time.Millisecond)
	}
	var token string
	for _, line := range tries {
		fields := strings.Fields(line)
		for i, f := range fields { // the guide quotes jsonpath for a shell
			fields[i] = strings.Trim(f, "'")
		}
		out, err := exec.Command(fields[0], fields[1:]...).CombinedOutput()
		if strings.Contains(line, " create token ") {
			token = strings.TrimSpace(string(out))
		}
		if strings.Contains(line, "--privileged") {
			if err == nil || !strings.Contains(string(out), "privileged, which this fleet does not allow") {
				t.Errorf("%s: want the privileged pod rejected by the policy, got %v\n%s", line, err, out)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v\n%s", line, err, out)
		}
	}

	// The dashboard the guide points at answers the guide's token, and asks anyone else to sign in.
	ca, err := os.ReadFile(dashboardCA)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(url, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	fleettest.Eventually(t, 2*time.Minute, func() (bool, string) {
		code, body := get(dashboardURL+"api/view", token)
		return code == http.StatusOK && strings.Contains(body, "sample-namespace"), fmt.Sprintf("%d %.300s", code, body)
	})
	if code, body := get(dashboardURL, ""); code != http.StatusUnauthorized || !strings.Contains(body, "/dashboard/login") {
		t.Errorf("GET %s without a token: %d %.200s; want 401 and the sign-in form", dashboardURL, code, body)
	}

	pids := fleet.ProcessesUsing(fleetDir)
	if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("quickstart exited with %v after SIGINT, want 0", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("quickstart still running 2 minutes after SIGINT")
	}
	if left := fleet.ProcessesUsing(fleetDir); len(left) > 0 {
		t.Errorf("processes %v of %v still running after the quickstart exited", left, pids)
	}
	if _, err := os.Stat(filepath.Clean(fleetDir)); !os.IsNotExist(err) {
		t.Errorf("fleet folder %s left behind", fleetDir)
	}
}
