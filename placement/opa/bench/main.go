package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	_ "embed"
	"encoding/base64"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"regent.dev/regent/fleet"
	"regent.dev/regent/loadgen"
	"regent.dev/regent/placement/opa"
	"regent.dev/regent/policyserver/selfsigned"
)

//go:embed placement.rego
var policy string

const (
	namespace  = "placement-policies"
	policyPath = "/v1/data/placement/bench/decision"
)

var managedClusters = schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1", Resource: "managedclusters"}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		if err := serve(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	opaBin := flag.String("opa", filepath.Join(fleet.DefaultBinDir(), "opa"), "OPA's server binary (hack/testbin.sh builds it)")
	clusters := flag.Int("clusters", 10000, "ManagedClusters to create and replicate")
	duration := flag.Duration("duration", 5*time.Second, "measured time per run")
	warmup := flag.Duration("warmup", time.Second, "unmeasured time before each run")
	concurrencies := flag.String("c", "1,16", "concurrencies (connections) to measure")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of Regent's server (whole run) here")
	flag.Parse()
	if err := bench(*opaBin, *clusters, *duration, *warmup, *concurrencies, *cpuProfile); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func bench(opaBin string, n int, duration, warmup time.Duration, concurrencies, cpuProfile string) error {
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "regent-placement-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	certs, err := selfsigned.Write(dir, "127.0.0.1")
	if err != nil {
		return err
	}
	var cs []int
	for _, s := range strings.Split(concurrencies, ",") {
		c, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("concurrency %q: %w", s, err)
		}
		cs = append(cs, c)
	}

	host, _ := os.Hostname()
	loadavg, _ := os.ReadFile("/proc/loadavg")
	fmt.Printf("# Placement API benchmark\n\nMachine: %s, load average at start %s (shared with other work; figures move with it).\n\n",
		host, strings.Join(strings.Fields(string(loadavg))[:3], " "))

	f, err := fleet.Start(ctx, fleet.Options{})
	if err != nil {
		return err
	}
	defer f.Stop()
	cfg := rest.CopyConfig(f.Hub.Config)
	cfg.QPS, cfg.Burst = 1000, 2000
	kube := kubernetes.NewForConfigOrDie(cfg)
	dyn := dynamic.NewForConfigOrDie(cfg)

	start := time.Now()
	if err := createClusters(ctx, dyn, n); err != nil {
		return err
	}
	fmt.Printf("Created %d ManagedClusters (labels, annotations, spec with a CA bundle, status with conditions, capacity and claims) in %s.\n\n", n, time.Since(start).Round(time.Second))
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := kube.CoreV1().ConfigMaps(namespace).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Labels: map[string]string{opa.PolicyLabel: opa.PolicyLabelValue}},
		Data:       map[string]string{"placement.rego": policy},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	token, err := querierToken(ctx, kube, "querier")
	if err != nil {
		return err
	}

	// Regent's placement API in a child process, so its memory is its own.
	self, err := os.Executable()
	if err != nil {
		return err
	}
	regentAddr, err := freeAddr()
	if err != nil {
		return err
	}
	memFile := filepath.Join(dir, "memstats.json")
	args := []string{"serve", "-kubeconfig", f.Hub.Kubeconfig, "-addr", regentAddr, "-cert", certs.CertFile, "-key", certs.KeyFile,
		"-namespace", namespace, "-memstats", memFile}
	if cpuProfile != "" {
		args = append(args, "-cpuprofile", cpuProfile)
	}
	start = time.Now()
	regent, err := startProcess(self, args...)
	if err != nil {
		return err
	}
	defer regent.stop()
	client := httpsClient(certs.CAPEM)
	auth := map[string]string{"Authorization": "Bearer " + token}
	regentURL := "https://" + regentAddr
	if err := waitFor(func() error {
		b, err := request(client, http.MethodPost, regentURL+"/v1/data/placement/bench/clusters", auth, `{"input":{}}`)
		if err == nil && string(b) != fmt.Sprintf("{\"result\":%d}\n", n) {
			err = fmt.Errorf("not all clusters replicated yet: %s", b)
		}
		return err
	}); err != nil {
		return fmt.Errorf("regent: %w", err)
	}
	fmt.Printf("Regent's placement API served all %d clusters %s after it started (list + watch of the inventory, policy load).\n\n", n, time.Since(start).Round(100*time.Millisecond))
	heap, err := regent.memStats(memFile)
	if err != nil {
		return err
	}
	if cpuProfile != "" {
		// Beside the CPU profile, where the heap goes once the inventory is in.
		if b, err := os.ReadFile(memFile + ".heap"); err == nil {
			_ = os.WriteFile(cpuProfile+".heap", b, 0o644)
		}
	}
	regentRSS, err := rssBytes(regent.pid)
	if err != nil {
		return err
	}

	// Auth: a token not seen before costs a TokenReview and a SubjectAccessReview; then the
	// decision is cached for 5 s.
	fresh, err := querierToken(ctx, kube, "querier-2")
	if err != nil {
		return err
	}
	freshAuth := map[string]string{"Authorization": "Bearer " + fresh}
	body := fmt.Sprintf(`{"input":{"clusters":[%s]}}`, clusterList(n))
	t0 := time.Now()
	if _, err := request(client, http.MethodPost, regentURL+policyPath, freshAuth, body); err != nil {
		return err
	}
	uncached := time.Since(t0)
	t0 = time.Now()
	if _, err := request(client, http.MethodPost, regentURL+policyPath, freshAuth, body); err != nil {
		return err
	}
	cached := time.Since(t0)

	// OPA's server with the same policy and the inventory as Regent serves it.
	export, err := request(client, http.MethodGet, regentURL+"/v1/data/kubernetes", auth, "")
	if err != nil {
		return err
	}
	var exported struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(export, &exported); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "data.json"), append(append([]byte(`{"kubernetes":`), exported.Result...), '}'), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "placement.rego"), []byte(policy), 0o644); err != nil {
		return err
	}
	opaAddr, err := freeAddr()
	if err != nil {
		return err
	}
	opaProc, err := startProcess(opaBin, "run", "--server", "--addr", opaAddr, "--skip-version-check", "--log-level", "error",
		"--tls-cert-file", certs.CertFile, "--tls-private-key-file", certs.KeyFile,
		filepath.Join(dir, "placement.rego"), filepath.Join(dir, "data.json"))
	if err != nil {
		return err
	}
	defer opaProc.stop()
	opaURL := "https://" + opaAddr
	if err := waitFor(func() error { _, err := request(client, http.MethodGet, opaURL+"/health", nil, ""); return err }); err != nil {
		return fmt.Errorf("opa: %w", err)
	}
	want, err := request(client, http.MethodPost, opaURL+policyPath, nil, body)
	if err != nil {
		return err
	}
	got, err := request(client, http.MethodPost, regentURL+policyPath, auth, body)
	if err != nil {
		return err
	}
	if string(got) != string(want) {
		return fmt.Errorf("Regent answers %s, OPA %s", got, want)
	}
	opaRSS, err := rssBytes(opaProc.pid)
	if err != nil {
		return err
	}

	fmt.Printf("Query: POST %s, input 5 cluster names (2 eligible), answer %s\n", policyPath, strings.TrimSpace(string(want)))
	fmt.Printf("Auth (Regent): first request of a new token %s (TokenReview + SubjectAccessReview), the next %s (cached 5 s per token, verb and path).\n\n",
		uncached.Round(10*time.Microsecond), cached.Round(10*time.Microsecond))
	fmt.Printf("| server | concurrency | req/s | p50 | p99 | errors |\n|---|---|---|---|---|---|\n")
	// both servers answer byte for byte alike, so one expected body serves both
	check := func(b []byte) error {
		if !bytes.Equal(b, want) {
			return fmt.Errorf("answer %s, want %s", b, want)
		}
		return nil
	}
	regentT := loadgen.Target{URL: regentURL + policyPath, Headers: auth, Body: []byte(body), Check: check}
	opaT := loadgen.Target{URL: opaURL + policyPath, Body: []byte(body), Check: check}
	sums := map[string]map[int]float64{"regent": {}, "opa": {}}
	for _, c := range cs {
		for _, which := range []string{"regent", "opa", "opa", "regent"} {
			t, name := regentT, "Regent placement API (HTTPS, bearer token)"
			if which == "opa" {
				t, name = opaT, "OPA "+opaVersion(opaBin)+" `opa run --server` (HTTPS)"
			}
			r, err := loadgen.Run(t, certs.CAPEM, c, warmup, duration)
			if err != nil && r.Requests == 0 {
				return fmt.Errorf("%s c=%d: %w", which, c, err)
			}
			sums[which][c] += r.Rate()
			fmt.Printf("| %s | %d | %.0f | %s | %s | %d |\n", name, c, r.Rate(), us(r.P50), us(r.P99), r.Errors)
		}
	}
	fmt.Printf("\nRatio Regent/OPA (req/s summed over the A-B-B-A runs):")
	for _, c := range cs {
		fmt.Printf(" c=%d: %.2f×;", c, sums["regent"][c]/sums["opa"][c])
	}
	fmt.Println()

	regentAfter, _ := rssBytes(regent.pid)
	opaAfter, _ := rssBytes(opaProc.pid)
	fmt.Printf("\nMemory with %d clusters replicated:\n\n| process | Go heap in use after GC | RSS before load | RSS after load |\n|---|---|---|---|\n", n)
	fmt.Printf("| Regent placement engine + informers + API | %s | %s | %s |\n", mib(heap.HeapInuse), mib(uint64(regentRSS)), mib(uint64(regentAfter)))
	fmt.Printf("| OPA server with the exported (pruned) inventory | — | %s | %s |\n", mib(uint64(opaRSS)), mib(uint64(opaAfter)))
	return nil
}

// createClusters creates n ManagedClusters shaped like registered ones, with their status.
func createClusters(ctx context.Context, dyn dynamic.Interface, n int) error {
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if err := createCluster(ctx, dyn, i); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	return firstErr
}

var regions = []string{"eu", "us", "ap"}

// caBundle stands for the PEM CA bundle a registered cluster carries (~1 KiB, base64 in JSON).
var caBundle = base64.StdEncoding.EncodeToString([]byte(strings.Repeat("-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIRAK\n", 24)))

func clusterName(i int) string { return fmt.Sprintf("cluster-%05d", i) }

// clusterList names 5 clusters the query asks about: by construction (region i%3, PCI level i%4)
// 6 and 15 are EU with PCI level ≥ 2, the others are not.
func clusterList(n int) string {
	var names []string
	for _, i := range []int{6, 15, 1, 2, 3} {
		names = append(names, strconv.Quote(clusterName(i%n)))
	}
	return strings.Join(names, ",")
}

func createCluster(ctx context.Context, dyn dynamic.Interface, i int) error {
	name := clusterName(i)
	region := regions[i%len(regions)]
	pci := strconv.Itoa(i % 4)
	lastApplied := fmt.Sprintf(`{"apiVersion":"cluster.open-cluster-management.io/v1","kind":"ManagedCluster","metadata":{"labels":{"region":%q,"pci-level":%q,"cloud":"Amazon","vendor":"OpenShift"},"name":%q},"spec":{"hubAcceptsClient":true,"leaseDurationSeconds":60}}`, region, pci, name)
	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
		"metadata": map[string]any{
			"name": name,
			"labels": map[string]any{
				"region": region, "pci-level": pci, "cloud": "Amazon", "vendor": "OpenShift", "name": name,
				"cluster.open-cluster-management.io/clusterset":   "default",
				"feature.open-cluster-management.io/addon-regent": "available",
			},
			"annotations": map[string]any{
				"kubectl.kubernetes.io/last-applied-configuration": lastApplied,
				"open-cluster-management.io/created-via":           "other",
			},
		},
		"spec": map[string]any{
			"hubAcceptsClient": true, "leaseDurationSeconds": int64(60),
			"managedClusterClientConfigs": []any{map[string]any{"url": "https://api." + name + ".example.com:6443", "caBundle": caBundle}},
		},
	}}
	created, err := dyn.Resource(managedClusters).Create(ctx, mc, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	now := time.Now().UTC().Format(time.RFC3339)
	cond := func(t, reason string) any {
		return map[string]any{"type": t, "status": "True", "reason": reason, "message": reason + " for " + name, "lastTransitionTime": now}
	}
	claim := func(n, v string) any { return map[string]any{"name": n, "value": v} }
	created.Object["status"] = map[string]any{
		"conditions": []any{cond("HubAcceptedManagedCluster", "HubClusterAdminAccepted"), cond("ManagedClusterJoined", "ManagedClusterJoined"),
			cond("ManagedClusterConditionAvailable", "ManagedClusterAvailable"), cond("ManagedClusterConditionClockSynced", "ManagedClusterClockSynced")},
		"capacity":    map[string]any{"cpu": "96", "memory": "394Gi", "pods": "750", "ephemeral-storage": "1Ti"},
		"allocatable": map[string]any{"cpu": "94", "memory": "380Gi", "pods": "750", "ephemeral-storage": "900Gi"},
		"version":     map[string]any{"kubernetes": "v1.35.4"},
		"clusterClaims": []any{claim("id.k8s.io", name), claim("platform.open-cluster-management.io", "AWS"),
			claim("region.open-cluster-management.io", region), claim("product.open-cluster-management.io", "OpenShift"), claim("pci.regent.dev", pci)},
	}
	if _, err := dyn.Resource(managedClusters).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("status of %s: %w", name, err)
	}
	return nil
}

// querierToken makes a ServiceAccount allowed to query every /v1/data path and returns a token.
func querierToken(ctx context.Context, kube kubernetes.Interface, name string) (string, error) {
	if _, err := kube.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-" + name},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/v1/data", "/v1/data/*"}, Verbs: []string{"get", "post"}}},
	}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-" + name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "bench-" + name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: namespace}},
	}, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	ttl := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}

// process is a server under test in a child process.
type process struct {
	pid  int
	stop func()
}

func startProcess(bin string, args ...string) (*process, error) {
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	return &process{pid: cmd.Process.Pid, stop: func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	}}, nil
}

// memStats asks the child for its heap figures (SIGUSR1) and reads them.
func (p *process) memStats(file string) (memStats, error) {
	_ = os.Remove(file)
	if err := syscall.Kill(p.pid, syscall.SIGUSR1); err != nil {
		return memStats{}, err
	}
	var m memStats
	err := waitFor(func() error {
		b, err := os.ReadFile(file)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &m)
	})
	return m, err
}

func httpsClient(caPEM []byte) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(caPEM)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func request(client *http.Client, method, url string, headers map[string]string, body string) ([]byte, error) {
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s %s: %d %s", method, url, resp.StatusCode, b)
	}
	return b, err
}

// waitFor retries f for up to 5 minutes.
func waitFor(f func() error) error {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		err := f()
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

func rssBytes(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, errors.New("no VmRSS")
}

func opaVersion(bin string) string {
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		return "?"
	}
	v, _ := strings.CutPrefix(strings.SplitN(string(out), "\n", 2)[0], "Version: ")
	return "v" + v
}

func us(d time.Duration) string {
	if d >= 10*time.Millisecond {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%d µs", d.Microseconds())
}

func mib(b uint64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
