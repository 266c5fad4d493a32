package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"regent.dev/regent/fleet"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/selfsigned"
)

// `regent hub` serves the dashboard on the placement API's HTTPS address, behind its auth, and
// not at all with --dashboard=false.
func TestHub_ServesTheDashboardOnThePlacementAPI(t *testing.T) {
	f := fleettest.Start(t, fleet.Options{})
	ctx := context.Background()
	certs, err := selfsigned.Write(t.TempDir(), "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	t.Setenv(cliEnv, "1")
	addrs := map[bool]string{}
	for _, on := range []bool{true, false} {
		addrs[on] = fleettest.FreeAddr(t)
		p, err := f.StartProcess(fmt.Sprintf("regent-hub-dashboard-%v", on), os.Args[0], "hub", "--kubeconfig", f.Hub.Kubeconfig,
			"--metrics-bind-address", "0", "--addon-manager=false", "--placement-admission-disabled",
			"--placement-api-addr", addrs[on], "--placement-api-cert-file", certs.CertFile, "--placement-api-key-file", certs.KeyFile,
			fmt.Sprintf("--dashboard=%v", on))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Stop(10 * time.Second) })
	}

	kube, err := kubernetes.NewForConfig(f.Hub.Config)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "default"
	if _, err := kube.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoles().Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "dashboard-viewer"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/dashboard"}, Verbs: []string{"get"}}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dashboard-viewer"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "dashboard-viewer"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "viewer", Namespace: ns}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, "viewer", &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(certs.CAPEM)
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	get := func(addr, path, token string) (int, string) {
		req, _ := http.NewRequest(http.MethodGet, "https://"+addr+path, nil)
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
		code, body := get(addrs[true], "/dashboard/api/view", tr.Status.Token)
		return code == http.StatusOK && strings.Contains(body, `"totals"`), fmt.Sprintf("%d %.200s", code, body)
	})
	if code, body := get(addrs[true], "/dashboard/", ""); code != http.StatusUnauthorized || !strings.Contains(body, "/dashboard/login") {
		t.Errorf("GET /dashboard/ without a token: %d %.200s; want 401 and the sign-in form", code, body)
	}
	fleettest.Eventually(t, 2*time.Minute, func() (bool, string) {
		code, body := get(addrs[false], "/v1/data", tr.Status.Token)
		return code != 0, body
	})
	if code, body := get(addrs[false], "/dashboard/", tr.Status.Token); code != http.StatusNotFound {
		t.Errorf("--dashboard=false serves /dashboard/: %d %.200s", code, body)
	}
}
