package opa

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/version"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
)

// opaBinary is OPA's own server as hack/testbin.sh builds it, at the version this module links.
// Without it the differential tests skip on a developer's machine (saying how to get it) and fail
// where REGENT_TESTBIN names the binaries' folder, as in CI.
func opaBinary(t *testing.T) string {
	t.Helper()
	bin, err := fleet.Binary(fleet.DefaultBinDir(), "opa")
	if err != nil {
		if os.Getenv(fleet.BinDirEnv) == "" {
			t.Skipf("OPA's server is needed to compare against: %v", err)
		}
		t.Fatal(err)
	}
	out, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatalf("%s version: %v", bin, err)
	}
	if want := "Version: " + version.Version + "\n"; !strings.HasPrefix(string(out), want) {
		t.Fatalf("%s is not OPA %s (the version go.mod pins): %q; run `make testbin` to rebuild it", bin, version.Version, out)
	}
	return bin
}

// opaServer is `opa run --server` on a loopback port, with nothing loaded.
type opaServer struct {
	url    string
	client *http.Client
}

// startOPA runs OPA's server with extra arguments (TLS flags, files to load) until the test ends.
// scheme is http or https; client must trust the server's certificate for https.
func startOPA(t testing.TB, bin, scheme string, client *http.Client, args ...string) *opaServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.Command(bin, append([]string{"run", "--server", "--addr", addr, "--skip-version-check", "--log-level", "error"}, args...)...)
	var stderr lockedBuffer
	cmd.Stdout, cmd.Stderr = &stderr, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	s := &opaServer{url: scheme + "://" + addr, client: client}
	fleettest.Eventually(t, 60*time.Second, func() (bool, string) {
		resp, err := client.Get(s.url + "/health")
		if err != nil {
			return false, fmt.Sprintf("opa not up: %v; output: %s", err, stderr.String())
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, fmt.Sprintf("opa /health: %d", resp.StatusCode)
	})
	return s
}

// lockedBuffer collects a child's output while the test reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (s *opaServer) put(t testing.TB, path, contentType string, body []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, s.url+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", contentType)
	resp, err := s.client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT %s on OPA: %d %s", path, resp.StatusCode, raw)
	}
}

// diffQuery is one request of testdata/differential/queries.json.
type diffQuery struct {
	Name    string            `json:"name"`
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Body    string            `json:"body"`
	Gzip    bool              `json:"gzip"`
	Headers map[string]string `json:"headers"`
}

type diffResponse struct {
	status      int
	contentType string
	body        []byte
}

func send(t *testing.T, client *http.Client, base, token string, q diffQuery) diffResponse {
	t.Helper()
	body := []byte(q.Body)
	if q.Gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		if _, err := zw.Write(body); err != nil {
			t.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			t.Fatal(err)
		}
		body = buf.Bytes()
	}
	req, err := http.NewRequest(q.Method, base+q.Path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range q.Headers {
		req.Header.Set(k, v)
	}
	if q.Gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", q.Method, q.Path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return diffResponse{status: resp.StatusCode, contentType: resp.Header.Get("Content-Type"), body: raw}
}

// firstDifference shows both bodies around where they first differ.
func firstDifference(got, want []byte) string {
	i := 0
	for i < len(got) && i < len(want) && got[i] == want[i] {
		i++
	}
	around := func(b []byte) string {
		lo, hi := max(0, i-300), min(len(b), i+300)
		return fmt.Sprintf("…%s⟨HERE⟩%s…", b[lo:i], b[i:hi])
	}
	return fmt.Sprintf("at byte %d\nRegent: %s\nOPA:    %s", i, around(got), around(want))
}

// comparable returns a response body with what legitimately differs between two servers replaced,
// and touched says whether anything was (then only the documents are compared, not the bytes):
//   - metrics become their sorted names: the values are timings and the cache-hit count, and the
//     compile timer is left out because it appears only when the prepared query was not cached
//     (OPA caches GET and POST apart, Regent once per path);
//   - each explain event's locals are sorted by variable: OPA lists them in the iteration order of
//     a hash map, which changes from one run of OPA to the next.
func comparable(t *testing.T, raw []byte) (doc any, touched bool) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return string(raw), false
	}
	obj, ok := doc.(map[string]any)
	if !ok {
		return doc, false
	}
	if m, ok := obj["metrics"].(map[string]any); ok {
		names := make([]string, 0, len(m))
		for k := range m {
			if k != "timer_rego_query_compile_ns" {
				names = append(names, k)
			}
		}
		sort.Strings(names)
		obj["metrics"] = names
		touched = true
	}
	if events, ok := obj["explanation"].([]any); ok {
		for _, e := range events {
			event, _ := e.(map[string]any) // a pretty explanation is lines of text
			if locals, ok := event["locals"].([]any); ok && len(locals) > 1 {
				sort.Slice(locals, func(i, j int) bool { return fmt.Sprint(locals[i]) < fmt.Sprint(locals[j]) })
				touched = true
			}
		}
	}
	if _, ok := obj["decision_id"]; ok {
		delete(obj, "decision_id")
		touched = true
	}
	return obj, touched
}

// TestDifferentialOPAServer runs a corpus of data API requests against the hub's placement API and
// against `opa run --server` holding the same policies and the same data (Regent's replicated
// inventory, exported through its own API), and wants the same status, content type and body:
// byte for byte, except where comparable says why not.
func TestDifferentialOPAServer(t *testing.T) {
	bin := opaBinary(t)
	h := startHub(t)
	ctx := context.Background()

	// The inventory: three clusters (labels, a taint, PCI claims), a set and its binding.
	for _, c := range []struct {
		name, region, pci string
		taint             bool
	}{{"eu-1", "eu", "3", true}, {"eu-2", "eu", "1", false}, {"us-1", "us", "3", false}} {
		spec := map[string]any{"hubAcceptsClient": true}
		if c.taint {
			spec["taints"] = []any{map[string]any{"key": "pci", "effect": "NoSelect"}}
		}
		mc := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
			"metadata": map[string]any{"name": c.name, "labels": map[string]any{"region": c.region}},
			"spec":     spec,
		}}
		created, err := h.dyn.Resource(managedClusters).Create(ctx, mc, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Object["status"] = map[string]any{
			"clusterClaims": []any{map[string]any{"name": "pci.regent.dev", "value": c.pci}},
			"version":       map[string]any{"kubernetes": "v1.35.4"},
		}
		if _, err := h.dyn.Resource(managedClusters).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.dyn.Resource(DefaultInventory[1]).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
		"metadata": map[string]any{"name": "eu"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.dyn.Resource(DefaultInventory[2]).Namespace(policyNamespace).Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
		"metadata": map[string]any{"name": "eu", "namespace": policyNamespace},
		"spec":     map[string]any{"clusterSet": "eu"},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// The policies: one ConfigMap, two modules.
	modules := map[string]string{}
	for _, name := range []string{"eu_pci.rego", "lib.rego"} {
		modules[name] = readTestdata(t, filepath.Join("differential", name))
	}
	h.applyPolicy(t, "diff", modules)
	h.eventuallyStatus(t, "diff", "ok")
	h.eventuallyQuery(t, "kubernetes/managedclusters/us-1/status/clusterClaims/0/value", "3")
	h.eventuallyQuery(t, "kubernetes/managedclustersetbindings/"+policyNamespace+"/eu/spec/clusterSet", "eu")
	h.eventuallyQuery(t, "placement/eu_pci/sets", "[eu]")

	// A caller allowed to query everything.
	if _, err := h.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "placement-query-all"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/v1/data", "/v1/data/*"}, Verbs: []string{"get", "post"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "placement-query-all"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "placement-query-all"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "differ", Namespace: policyNamespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := serviceAccountToken(t, h, "differ")
	regent := h.srv.Client()

	// OPA gets the same modules under the same ids (so error locations and traces name the same
	// files) and the inventory as Regent serves it.
	opa := startOPA(t, bin, "http", &http.Client{Timeout: 30 * time.Second})
	for name, text := range modules {
		opa.put(t, "/v1/policies/"+policyNamespace+"/diff/"+name, "text/plain", []byte(text))
	}
	var export diffResponse
	fleettest.Eventually(t, 20*time.Second, func() (bool, string) {
		export = send(t, regent, h.srv.URL, token, diffQuery{Method: http.MethodGet, Path: "/v1/data/kubernetes"})
		return export.status == http.StatusOK, fmt.Sprintf("export: %d %s", export.status, export.body)
	})
	var exported struct {
		Result json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(export.body, &exported); err != nil || len(exported.Result) == 0 {
		t.Fatalf("export %s: %v", export.body, err)
	}
	opa.put(t, "/v1/data/kubernetes", "application/json", exported.Result)

	var corpus []diffQuery
	if err := json.Unmarshal([]byte(readTestdata(t, "differential/queries.json")), &corpus); err != nil {
		t.Fatal(err)
	}
	for _, q := range corpus {
		t.Run(q.Name, func(t *testing.T) {
			got := send(t, regent, h.srv.URL, token, q)
			want := send(t, opa.client, opa.url, "", q)
			t.Logf("%d %.300s", got.status, got.body)
			if got.status != want.status || got.contentType != want.contentType {
				t.Errorf("%s %s: Regent %d %q, OPA %d %q\nRegent: %s\nOPA:    %s", q.Method, q.Path,
					got.status, got.contentType, want.status, want.contentType, got.body, want.body)
				return
			}
			gotDoc, gotTouched := comparable(t, got.body)
			wantDoc, wantTouched := comparable(t, want.body)
			switch {
			case !reflect.DeepEqual(gotDoc, wantDoc):
				t.Errorf("%s %s: bodies differ\n%s", q.Method, q.Path, firstDifference(got.body, want.body))
			case !gotTouched && !wantTouched && !bytes.Equal(got.body, want.body):
				t.Errorf("%s %s: same document, different bytes\nRegent: %q\nOPA:    %q", q.Method, q.Path, got.body, want.body)
			}
		})
	}
}
