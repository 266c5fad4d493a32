package quickstart

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"regent.dev/regent/hub/dashboard"
	"regent.dev/regent/policyserver/selfsigned"
)

// DashboardViewer is the ServiceAccount (in namespace default) whose token signs in to the
// quickstart's dashboard, and the name of the ClusterRole and binding that let it look, as
// deploy/hub's regent-dashboard-viewer does for who an admin binds it to.
const DashboardViewer = "regent-dashboard-viewer"

// localDashboard is the hub's fleet dashboard as the quickstart serves it: on the placement
// API's HTTPS address, a loopback port with a throwaway certificate.
type localDashboard struct {
	// URL is the page's address; CAFile the PEM CA of its certificate.
	URL, CAFile string
	// hubArgs are what `regent hub` needs to serve it.
	hubArgs []string
}

// prepareDashboard makes the dashboard's certificate under dir and picks its port, once: a
// restarted hub serves it at the same address.
func prepareDashboard(dir string) (localDashboard, error) {
	dir = filepath.Join(dir, "dashboard")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return localDashboard{}, err
	}
	certs, err := selfsigned.Write(dir, "127.0.0.1", "localhost")
	if err != nil {
		return localDashboard{}, fmt.Errorf("dashboard certificate: %w", err)
	}
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, certs.CAPEM, 0o644); err != nil {
		return localDashboard{}, err
	}
	addr, err := freePort()
	if err != nil {
		return localDashboard{}, err
	}
	return localDashboard{URL: "https://" + addr + dashboard.Path, CAFile: caFile, hubArgs: []string{
		"--placement-api-addr", addr, "--placement-api-cert-file", certs.CertFile, "--placement-api-key-file", certs.KeyFile,
		// The quickstart registers no Placement webhook: the query API and the dashboard only.
		"--placement-admission-disabled"}}, nil
}

// grantDashboardViewer creates the ServiceAccount DashboardViewer and lets it see the dashboard;
// what exists already is kept.
func grantDashboardViewer(ctx context.Context, hub *rest.Config) error {
	kube, err := kubernetes.NewForConfig(hub)
	if err != nil {
		return err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: DashboardViewer, Namespace: metav1.NamespaceDefault}}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: DashboardViewer},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{dashboard.AuthPath}, Verbs: []string{dashboard.AuthVerb}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: DashboardViewer},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: DashboardViewer},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: DashboardViewer, Namespace: metav1.NamespaceDefault}}}
	for _, create := range []func() error{
		func() error {
			_, err := kube.CoreV1().ServiceAccounts(sa.Namespace).Create(ctx, sa, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := kube.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{})
			return err
		},
	} {
		if err := create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("dashboard viewer: %w", err)
		}
	}
	return nil
}
