package opa

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/selfsigned"
)

// testServe runs the API as `regent hub --placement-api-addr` does, on its own policy namespace
// and as an identity holding only placementRules, and queries it over verified HTTPS with an
// authorized ServiceAccount token.
func testServe(t *testing.T, h *hubEnv) {
	ctx := context.Background()
	const ns = "served-policies"
	if _, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Labels: map[string]string{PolicyLabel: PolicyLabelValue}},
		Data:       map[string]string{"p.rego": "package served\n\nclusters := count(object.keys(data.kubernetes.managedclusters))\n"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	certs, err := selfsigned.Write(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	identity := leastPrivilege(t, h, ns)
	go func() {
		done <- Serve(sctx, identity, Options{CertFile: certs.CertFile, KeyFile: certs.KeyFile, Namespace: ns}, ln)
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})

	if _, err := h.kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "placement-query-served"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "placement-query-served"},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: "served-querier", Namespace: policyNamespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "placement-query-served"},
		Rules:      []rbacv1.PolicyRule{{NonResourceURLs: []string{"/v1/data/served/*"}, Verbs: []string{"post"}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	token := serviceAccountToken(t, h, "served-querier")

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CAPEM)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	post := func(path string) (int, map[string]any) {
		req, err := http.NewRequest(http.MethodPost, "https://"+ln.Addr().String()+path, bytes.NewBufferString(`{"input":{}}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := hc.Do(req)
		if err != nil {
			return 0, map[string]any{"transport": err.Error()}
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, out
	}
	// Serve answers once its caches are up; the ManagedCluster of the Inventory subtest is gone,
	// the count is what the hub holds now.
	fleettest.Eventually(t, 30*time.Second, func() (bool, string) {
		code, body := post("/v1/data/served/clusters")
		return code == http.StatusOK && fmt.Sprint(body["result"]) == "0", fmt.Sprintf("POST served/clusters: %d %v", code, body)
	})
	// The least-privileged identity could write the status annotation and the Event.
	fleettest.Eventually(t, 20*time.Second, func() (bool, string) {
		cm, err := h.kube.CoreV1().ConfigMaps(ns).Get(ctx, "p", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		evs, err := h.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=p,reason=" + ReasonLoaded})
		if err != nil {
			return false, err.Error()
		}
		return cm.Annotations[StatusAnnotation] == `{"status":"ok"}` && len(evs.Items) == 1,
			fmt.Sprintf("annotation %q, %d %s Events", cm.Annotations[StatusAnnotation], len(evs.Items), ReasonLoaded)
	})
	// The role grants post on served/* only: a GET elsewhere is refused.
	if code, body := post("/v1/data/t/api/answer"); code != http.StatusForbidden {
		t.Errorf("path outside the grant: %d %v, want 403", code, body)
	}
}

// placementRules are all the hub's identity needs for the placement engine, its API, the
// Placement webhook and the remediator (deploy/hub/rbac.yaml's regent-hub-placement grants the
// same): reviews for the API's callers, the inventory's list/watch, namespace labels, Placements
// watched and patched, and events.
var placementRules = []rbacv1.PolicyRule{
	{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
	{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters", "managedclustersets", "managedclustersetbindings", "addonplacementscores"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"placements"}, Verbs: []string{"list", "watch", "patch"}},
	{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list", "watch"}},
	{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
}

// placementNamespaceRules are granted in the policy namespace only: read the policies, write
// their status annotation.
var placementNamespaceRules = []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"list", "watch", "patch"}},
}

// leastPrivilege returns a client configuration for a ServiceAccount bound to placementRules and,
// in ns, placementNamespaceRules.
func leastPrivilege(t *testing.T, h *hubEnv, ns string) *rest.Config {
	t.Helper()
	ctx := context.Background()
	const name = "placement-engine"
	rbac := h.kube.RbacV1()
	subjects := []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: policyNamespace}}
	if _, err := rbac.ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: placementRules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
		Subjects:   subjects,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.Roles(ns).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: placementNamespaceRules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := rbac.RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   subjects,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.AnonymousClientConfig(h.cfg)
	cfg.BearerToken = serviceAccountToken(t, h, name)
	return cfg
}
