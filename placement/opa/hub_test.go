package opa

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/fleet/fleettest"
)

const policyNamespace = "placement-policies"

type hubEnv struct {
	kube   kubernetes.Interface
	dyn    dynamic.Interface
	cfg    *rest.Config
	client client.Client
	engine *Engine
	srv    *httptest.Server
}

// startHub runs a hub apiserver with the policy loader, the inventory (the defaults plus
// namespaces, added the way --placement-inventory adds a type) and the HTTPS data API.
func startHub(t *testing.T) *hubEnv {
	hub := fleettest.Hub(t)
	kube := kubernetes.NewForConfigOrDie(hub.Config)
	dyn := dynamic.NewForConfigOrDie(hub.Config)
	cl, err := client.New(hub.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policyNamespace}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	t.Cleanup(broadcaster.Shutdown)
	recorder := broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "regent-placement"})

	engine := NewEngine()
	if err := NewPolicies(engine, kube, policyNamespace, recorder).Start(ctx); err != nil {
		t.Fatal(err)
	}
	nsGVR, err := ParseGVR("/v1/namespaces")
	if err != nil {
		t.Fatal(err)
	}
	if err := NewInventory(engine, dyn, append(DefaultInventory, nsGVR)).Start(ctx); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(&Handler{Engine: engine, Auth: NewAuthorizer(kube)})
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return &hubEnv{cfg: hub.Config, kube: kube, dyn: dyn, client: cl, engine: engine, srv: srv}
}

func (h *hubEnv) query(t *testing.T, path string) (any, bool) {
	t.Helper()
	v, ok, err := h.engine.Query(context.Background(), strings.Split(path, "/"), nil)
	if err != nil {
		t.Fatalf("query %s: %v", path, err)
	}
	return v, ok
}

// eventuallyQuery waits until the document at path is want (fmt-formatted), or undefined when
// want is "<undefined>".
func (h *hubEnv) eventuallyQuery(t *testing.T, path, want string) {
	t.Helper()
	fleettest.Eventually(t, 20*time.Second, func() (bool, string) {
		v, ok := h.query(t, path)
		got := "<undefined>"
		if ok {
			got = fmt.Sprint(v)
		}
		return got == want, fmt.Sprintf("%s = %s, want %s", path, got, want)
	})
}

func (h *hubEnv) applyPolicy(t *testing.T, name string, data map[string]string) {
	t.Helper()
	ctx := context.Background()
	cms := h.kube.CoreV1().ConfigMaps(policyNamespace)
	cm, err := cms.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = cms.Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{PolicyLabel: PolicyLabelValue}},
			Data:       data,
		}, metav1.CreateOptions{})
	} else if err == nil {
		cm.Data = data
		_, err = cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("apply policy %s: %v", name, err)
	}
}

// eventuallyStatus waits for the ConfigMap's kube-mgmt status annotation to report status and,
// for an error, returns its first Rego error as file:row: message.
func (h *hubEnv) eventuallyStatus(t *testing.T, name, status string) string {
	t.Helper()
	var st struct {
		Status string `json:"status"`
		Error  *struct {
			Code   string `json:"code"`
			Errors []struct {
				Message  string `json:"message"`
				Location struct {
					File string `json:"file"`
					Row  int    `json:"row"`
				} `json:"location"`
			} `json:"errors"`
		} `json:"error"`
	}
	var raw string
	fleettest.Eventually(t, 20*time.Second, func() (bool, string) {
		cm, err := h.kube.CoreV1().ConfigMaps(policyNamespace).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		raw = cm.Annotations[StatusAnnotation]
		st.Error = nil
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			return false, fmt.Sprintf("annotation %q: %v", raw, err)
		}
		return st.Status == status, "status annotation is " + raw
	})
	if status != "error" {
		return ""
	}
	if st.Error == nil || st.Error.Code != "invalid_parameter" || len(st.Error.Errors) == 0 {
		t.Fatalf("error status without OPA's error body: %s", raw)
	}
	e := st.Error.Errors[0]
	return fmt.Sprintf("%s:%d: %s", e.Location.File, e.Location.Row, e.Message)
}

func (h *hubEnv) eventuallyEvent(t *testing.T, name, reason string) {
	t.Helper()
	fleettest.Eventually(t, 20*time.Second, func() (bool, string) {
		evs, err := h.kube.CoreV1().Events(policyNamespace).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + name + ",reason=" + reason,
		})
		if err != nil {
			return false, err.Error()
		}
		return len(evs.Items) > 0, fmt.Sprintf("no %s Event on %s", reason, name)
	})
}

func TestOnHub(t *testing.T) {
	h := startHub(t)
	t.Run("HotReload", func(t *testing.T) { testHotReload(t, h) })
	t.Run("CompileError", func(t *testing.T) { testCompileError(t, h) })
	t.Run("Inventory", func(t *testing.T) { testInventory(t, h) })
	t.Run("Auth", func(t *testing.T) { testAuth(t, h) })
	t.Run("Serve", func(t *testing.T) { testServe(t, h) })
}

func testHotReload(t *testing.T, h *hubEnv) {
	h.applyPolicy(t, "reload", map[string]string{"main.rego": "package t.reload\n\nv := 1\n"})
	h.eventuallyQuery(t, "t/reload/v", "1")
	h.eventuallyStatus(t, "reload", "ok")
	h.eventuallyEvent(t, "reload", ReasonLoaded)

	h.applyPolicy(t, "reload", map[string]string{
		"main.rego":  "package t.reload\n\nv := 2\n",
		"extra.rego": "package t.reload\n\nw := v + 1\n",
	})
	h.eventuallyQuery(t, "t/reload/w", "3")
	h.eventuallyQuery(t, "t/reload/v", "2")

	if err := h.kube.CoreV1().ConfigMaps(policyNamespace).Delete(context.Background(), "reload", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventuallyQuery(t, "t/reload/v", "<undefined>")
	for _, id := range h.engine.Modules() {
		if strings.HasPrefix(id, policyNamespace+"/reload/") {
			t.Errorf("module %s still loaded after its ConfigMap was deleted", id)
		}
	}

	// A deleted library that another module still calls keeps serving until the caller stops
	// calling it, then goes.
	h.applyPolicy(t, "lib", map[string]string{"lib.rego": "package t.lib\n\ndouble(x) := 2 * x\n\nmarker := true\n"})
	h.applyPolicy(t, "caller", map[string]string{"caller.rego": "package t.caller\n\nfour := data.t.lib.double(2)\n"})
	h.eventuallyQuery(t, "t/caller/four", "4")
	if err := h.kube.CoreV1().ConfigMaps(policyNamespace).Delete(context.Background(), "lib", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.applyPolicy(t, "caller", map[string]string{"caller.rego": "package t.caller\n\nfour := 4\n\nnew := true\n"})
	h.eventuallyQuery(t, "t/caller/new", "true")
	h.eventuallyQuery(t, "t/lib/marker", "<undefined>")
}

func testCompileError(t *testing.T, h *hubEnv) {
	h.applyPolicy(t, "good", map[string]string{"good.rego": "package t.good\n\nok := true\n"})
	h.eventuallyQuery(t, "t/good/ok", "true")

	// A ConfigMap that never compiled: error with file and line, an Event, and the good one serves.
	h.applyPolicy(t, "broken", map[string]string{"broken.rego": "package t.broken\n\nx := 1\ny := undefined_function(x)\n"})
	st := h.eventuallyStatus(t, "broken", "error")
	if !strings.Contains(st, policyNamespace+"/broken/broken.rego:4:") {
		t.Errorf("error does not name the module and line 4: %s", st)
	}
	h.eventuallyEvent(t, "broken", ReasonLoadFailed)
	h.eventuallyQuery(t, "t/good/ok", "true")
	h.eventuallyQuery(t, "t/broken/x", "<undefined>")

	// A good ConfigMap edited into a parse error keeps its previous version serving.
	h.applyPolicy(t, "good", map[string]string{"good.rego": "package t.good\n\nok := true\nok2 := \n"})
	st = h.eventuallyStatus(t, "good", "error")
	if !strings.Contains(st, policyNamespace+"/good/good.rego:") {
		t.Errorf("error does not name the module: %s", st)
	}
	h.eventuallyQuery(t, "t/good/ok", "true")

	// Fixing it loads the fix and reports ok again.
	h.applyPolicy(t, "good", map[string]string{"good.rego": "package t.good\n\nok := true\nok2 := 2\n"})
	h.eventuallyStatus(t, "good", "ok")
	h.eventuallyQuery(t, "t/good/ok2", "2")
}

var managedClusters = schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1", Resource: "managedclusters"}

func testInventory(t *testing.T, h *hubEnv) {
	ctx := context.Background()
	mc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1",
		"kind":       "ManagedCluster",
		"metadata": map[string]any{
			"name":   "eu-1",
			"labels": map[string]any{"region": "eu"},
			"annotations": map[string]any{
				"regent.dev/tier": "gold",
				"kubectl.kubernetes.io/last-applied-configuration": "{}",
			},
		},
		"spec": map[string]any{
			"hubAcceptsClient": true,
			"taints":           []any{map[string]any{"key": "pci", "effect": "NoSelect"}},
		},
	}}
	if _, err := h.dyn.Resource(managedClusters).Create(ctx, mc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventuallyQuery(t, "kubernetes/managedclusters/eu-1/metadata/labels/region", "eu")
	h.eventuallyQuery(t, "kubernetes/managedclusters/eu-1/spec/taints/0/key", "pci")
	h.eventuallyQuery(t, "kubernetes/managedclusters/eu-1/metadata/annotations", "map[regent.dev/tier:gold]")
	h.eventuallyQuery(t, "kubernetes/managedclusters/eu-1/metadata/managedFields", "<undefined>")
	h.eventuallyQuery(t, "kubernetes/managedclusters/eu-1/metadata/resourceVersion", "<undefined>")
	// The configured extra type is replicated too, cluster-scoped at kubernetes.<resource>.<name>.
	h.eventuallyQuery(t, "kubernetes/namespaces/"+policyNamespace+"/metadata/name", policyNamespace)

	// Status: conditions and cluster claims are kept, the rest (capacity, version) is not.
	got, err := h.dyn.Resource(managedClusters).Get(ctx, "eu-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got.Object["status"] = map[string]any{
		"conditions": []any{map[string]any{
			"type": "ManagedClusterConditionAvailable", "status": "True", "reason": "Test", "message": "up",
			"lastTransitionTime": "2026-01-01T00:00:00Z",
		}},
		"clusterClaims": []any{map[string]any{"name": "pci.regent.dev", "value": "2"}},
		"capacity":      map[string]any{"cpu": "8"},
		"version":       map[string]any{"kubernetes": "v1.35.4"},
	}
	if _, err := h.dyn.Resource(managedClusters).UpdateStatus(ctx, got, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventuallyQuery(t, "kubernetes/managedclusters/eu-1/status/clusterClaims/0/value", "2")
	h.eventuallyQuery(t, "kubernetes/managedclusters/eu-1/status/conditions/0/status", "True")
	h.eventuallyQuery(t, "kubernetes/managedclusters/eu-1/status/capacity", "<undefined>")
	h.eventuallyQuery(t, "kubernetes/managedclusters/eu-1/status/version", "<undefined>")

	// Sets and bindings, at their default versions.
	set := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSet",
		"metadata": map[string]any{"name": "eu"},
	}}
	if _, err := h.dyn.Resource(DefaultInventory[1]).Create(ctx, set, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1beta2", "kind": "ManagedClusterSetBinding",
		"metadata": map[string]any{"name": "eu", "namespace": policyNamespace},
		"spec":     map[string]any{"clusterSet": "eu"},
	}}
	if _, err := h.dyn.Resource(DefaultInventory[2]).Namespace(policyNamespace).Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventuallyQuery(t, "kubernetes/managedclustersets/eu/kind", "ManagedClusterSet")
	h.eventuallyQuery(t, "kubernetes/managedclustersetbindings/"+policyNamespace+"/eu/spec/clusterSet", "eu")

	fleettest.Edit(t, h.client, newManagedCluster("eu-1"), func(u *unstructured.Unstructured) {
		labels := u.GetLabels()
		labels["region"] = "us"
		u.SetLabels(labels)
	})
	h.eventuallyQuery(t, "kubernetes/managedclusters/eu-1/metadata/labels/region", "us")

	if err := h.dyn.Resource(managedClusters).Delete(ctx, "eu-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventuallyQuery(t, "kubernetes/managedclusters/eu-1", "<undefined>")

	// Namespaced objects land under their namespace.
	scores := schema.GroupVersionResource{Group: "cluster.open-cluster-management.io", Version: "v1alpha1", Resource: "addonplacementscores"}
	score := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1alpha1",
		"kind":       "AddOnPlacementScore",
		"metadata":   map[string]any{"name": "cpu", "namespace": policyNamespace},
	}}
	if _, err := h.dyn.Resource(scores).Namespace(policyNamespace).Create(ctx, score, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	h.eventuallyQuery(t, "kubernetes/addonplacementscores/"+policyNamespace+"/cpu/kind", "AddOnPlacementScore")
}

func newManagedCluster(name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "cluster.open-cluster-management.io", Version: "v1", Kind: "ManagedCluster"})
	u.SetName(name)
	return u
}

// serviceAccountToken makes a ServiceAccount and returns a token for it from the TokenRequest
// API, as a pod running as it would hold.
func serviceAccountToken(t *testing.T, h *hubEnv, name string) string {
	t.Helper()
	ctx := context.Background()
	if _, err := h.kube.CoreV1().ServiceAccounts(policyNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	ttl := int64(3600)
	tr, err := h.kube.CoreV1().ServiceAccounts(policyNamespace).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

func (h *hubEnv) do(t *testing.T, method, path, token, body string) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, h.srv.URL+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := h.srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil {
		t.Fatalf("%s %s: body %q is not a JSON object: %v", method, path, raw, err)
	}
	return resp.StatusCode, out
}

func testAuth(t *testing.T, h *hubEnv) {
	ctx := context.Background()
	h.applyPolicy(t, "api", map[string]string{"api.rego": "package t.api\n\ngreeting := sprintf(\"hello %s\", [input.name])\n\nanswer := 42\n"})
	h.eventuallyQuery(t, "t/api/answer", "42")

	code, body := h.do(t, http.MethodPost, "/v1/data/t/api/greeting", "", `{"input":{"name":"x"}}`)
	if code != http.StatusUnauthorized || body["code"] != "unauthorized" {
		t.Errorf("no token: %d %v, want 401 unauthorized", code, body)
	}
	code, body = h.do(t, http.MethodGet, "/v1/data/t/api/answer", "not-a-token", "")
	if code != http.StatusUnauthorized {
		t.Errorf("bad token: %d %v, want 401", code, body)
	}

	denied := serviceAccountToken(t, h, "no-rbac")
	code, body = h.do(t, http.MethodPost, "/v1/data/t/api/greeting", denied, `{"input":{"name":"x"}}`)
	if code != http.StatusForbidden || body["code"] != "forbidden" || body["message"] == "" {
		t.Errorf("token without RBAC: %d %v, want 403 forbidden with a message", code, body)
	}

	if _, err := h.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "placement-query"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/v1/data/*"}, Verbs: []string{"get", "post"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "placement-query"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "placement-query"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "querier", Namespace: policyNamespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	allowed := serviceAccountToken(t, h, "querier")
	fleettest.Eventually(t, 20*time.Second, func() (bool, string) {
		code, body = h.do(t, http.MethodPost, "/v1/data/t/api/greeting", allowed, `{"input":{"name":"x"}}`)
		return code == http.StatusOK, fmt.Sprintf("token with RBAC: %d %v", code, body)
	})
	if body["result"] != "hello x" {
		t.Errorf("POST result %v, want hello x", body)
	}
	code, body = h.do(t, http.MethodGet, "/v1/data/t/api/answer", allowed, "")
	if code != http.StatusOK || fmt.Sprint(body["result"]) != "42" {
		t.Errorf("GET: %d %v, want 200 result 42", code, body)
	}
	code, body = h.do(t, http.MethodPost, "/v1/data/t/api/nothing", allowed, `{"input":{}}`)
	if code != http.StatusOK || len(body) != 0 {
		t.Errorf("undefined document: %d %v, want 200 {}", code, body)
	}
	code, body = h.do(t, http.MethodPost, "/v1/data/t/api/answer", allowed, `{"input":`)
	if code != http.StatusBadRequest || body["code"] != "invalid_parameter" {
		t.Errorf("malformed body: %d %v, want 400 invalid_parameter", code, body)
	}
}
