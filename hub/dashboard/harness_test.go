package dashboard_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub"
	"regent.dev/regent/hub/dashboard"
	"regent.dev/regent/placement/opa"
)

var runs atomic.Int64

var testScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(clusterv1beta1.Install(s))
	utilruntime.Must(policyv1.AddToScheme(s))
	utilruntime.Must(policyv1beta1.AddToScheme(s))
	utilruntime.Must(openreportsv1alpha1.AddToScheme(s))
	return s
}()

// env is one test's hub: a namespace for its roots, a client, a kube clientset for tokens and
// RBAC, and the dashboard served over HTTPS with the hub's real authorizer.
type env struct {
	t    *testing.T
	ctx  context.Context
	c    client.Client
	kube kubernetes.Interface
	ns   string
	srv  *httptest.Server
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := client.New(hubCluster.Config, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(hubCluster.Config)
	if err != nil {
		t.Fatal(err)
	}
	ns := fmt.Sprintf("%s-%d", strings.ToLower(strings.TrimPrefix(t.Name(), "Test")), runs.Add(1))
	ns = strings.NewReplacer("_", "-", "/", "-").Replace(ns)
	if len(ns) > 40 {
		ns = ns[len(ns)-40:]
	}
	ns = strings.Trim(ns, "-")
	e := &env{t: t, ctx: ctx, c: c, kube: kube, ns: ns}
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	return e
}

// serveWithHub runs the hub manager (propagator and all) with the board on its cache, as
// `regent hub --dashboard` does, and serves the dashboard.
func (e *env) serveWithHub() {
	e.t.Helper()
	mgr, err := hub.NewManager(hubCluster.Config, hub.Options{MetricsBindAddress: "0"})
	if err != nil {
		e.t.Fatal(err)
	}
	board := dashboard.NewBoard(mgr.GetCache(), nil, mgr.GetLogger()).WithReplicas(mgr.Replicas)
	if err := mgr.Add(board); err != nil {
		e.t.Fatal(err)
	}
	fleettest.StartManager(e.t, mgr)
	e.serve(board)
}

// serveWithCache runs only a cache and the board on it: the objects the test writes are all
// there is, no controller changes them.
func (e *env) serveWithCache() {
	e.t.Helper()
	c, err := cache.New(hubCluster.Config, cache.Options{Scheme: testScheme})
	if err != nil {
		e.t.Fatal(err)
	}
	board := dashboard.NewBoard(c, nil, logr.Discard())
	fleettest.StartManager(e.t, c)
	fleettest.StartManager(e.t, board)
	e.serve(board)
}

func (e *env) serve(board *dashboard.Board) {
	mux := http.NewServeMux()
	mux.Handle(dashboard.Path, dashboard.NewServer(board, opa.NewAuthorizer(e.kube)))
	e.srv = httptest.NewUnstartedServer(mux)
	e.srv.StartTLS()
	// The browser's event stream stays open until its connection closes.
	e.t.Cleanup(func() { e.srv.CloseClientConnections(); e.srv.Close() })
}

func (e *env) create(o client.Object) {
	e.t.Helper()
	if err := e.c.Create(e.ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// cluster registers a managed cluster's namespace on the hub; names carry the test's namespace.
func (e *env) cluster(short string) string {
	name := e.ns + "-" + short
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return name
}

// viewer returns a token for a new ServiceAccount; with grant it may get /dashboard.
func (e *env) viewer(name string, grant bool) string {
	e.t.Helper()
	e.create(&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns}})
	if grant {
		role := e.ns + "-" + name
		e.create(&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: role},
			Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{dashboard.AuthPath}, Verbs: []string{dashboard.AuthVerb}}}})
		e.create(&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: role},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: e.ns}}})
	}
	ttl := int64(3600)
	tr, err := e.kube.CoreV1().ServiceAccounts(e.ns).CreateToken(e.ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return tr.Status.Token
}
