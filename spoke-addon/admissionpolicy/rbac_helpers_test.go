package admissionpolicy

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/policyserver/lifecycle"
	"regent.dev/regent/policyserver/selfsigned"
)

// serviceAccountConfig authenticates as the ServiceAccount and nothing else, with a token from
// the TokenRequest API, as the projected token of a pod running as it would.
func serviceAccountConfig(t testing.TB, admin *rest.Config, name string) *rest.Config {
	t.Helper()
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		t.Fatal(err)
	}
	ttl := int64(3600)
	tr, err := kube.CoreV1().ServiceAccounts(testNamespace).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token for ServiceAccount %s: %v", name, err)
	}
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = tr.Status.Token
	return cfg
}

// serviceAccountMay asks the apiserver's authorizer, as an admin, whether the ServiceAccount may
// do verb on group/resource (in namespace, named name when given).
func serviceAccountMay(t testing.TB, c client.Client, sa, verb, group, resource, namespace, name string) bool {
	t.Helper()
	review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User:   fmt.Sprintf("system:serviceaccount:%s:%s", testNamespace, sa),
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + testNamespace, "system:authenticated"},
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Verb: verb, Group: group, Resource: resource, Namespace: namespace, Name: name},
	}}
	if err := c.Create(context.Background(), review); err != nil {
		t.Fatal(err)
	}
	return review.Status.Allowed
}

// serviceAccountComesTo asks until the authorizer answers want, for up to 30 s, and says whether
// it did: the apiserver's RBAC authorizer reads roles and bindings from its own informers, so a
// grant or a removal the controller just wrote takes effect a moment later.
func serviceAccountComesTo(t testing.TB, c client.Client, want bool, sa, verb, group, resource, namespace, name string) bool {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if serviceAccountMay(t, c, sa, verb, group, resource, namespace, name) == want {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// logLines keeps every line a replica logs, and what client-go logs through klog meanwhile
// (leader election reports its failures there), so a test can tell no call was refused.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, prefix+" "+args)
	}, funcr.Options{Verbosity: 1})
}

// captureKlog sends klog to l until the test ends; tests in this package do not run in parallel.
func (l *logLines) captureKlog(t testing.TB) {
	klog.SetLogger(l.logger())
	t.Cleanup(klog.ClearLogger)
}

func (l *logLines) matching(word string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, line := range l.lines {
		if strings.Contains(strings.ToLower(line), word) {
			out = append(out, line)
		}
	}
	return out
}

// runProcess runs replica 0 of ps (or its leader, by role) in process, as cfg, with short
// Leases and a signed cache of its own, advertising its loopback address as a pod its IP, until
// stop is called or the test ends; stop waits for it to return.
func runProcess(t testing.TB, cfg *rest.Config, role lifecycle.Role, ps string, log logr.Logger) (stop func()) {
	t.Helper()
	dir := t.TempDir()
	certs, err := selfsigned.Write(dir, "127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts := lifecycle.Options{
		Config: cfg, Role: role, Namespace: testNamespace, PolicyServer: ps, Replica: 0,
		SignedCache: filepath.Join(dir, "signed"), AdvertiseAddress: ln.Addr().String(),
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond,
		ResyncInterval: 2 * time.Second, RetryInterval: 2 * time.Second,
		Logger: log,
	}
	opts.Pull.FileRoots = []string{os.TempDir()} // the tests' modules, allowed explicitly
	opts.Server.Listener = ln
	opts.Server.CertFile, opts.Server.KeyFile = certs.CertFile, certs.KeyFile
	opts.Server.CacheDir = filepath.Join(dir, "private")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- lifecycle.Run(ctx, opts) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("%s returned %v", role, err)
				}
			case <-time.After(time.Minute):
				t.Errorf("%s did not stop", role)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitRBAC polls the PolicyServer until its RBACReady condition has status and reason.
func waitRBAC(t testing.TB, c client.Client, ps string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	fleettest.Eventually(t, time.Minute, func() (bool, string) {
		s := &kubewardenv1.PolicyServer{}
		if err := c.Get(context.Background(), client.ObjectKey{Name: ps}, s); err != nil {
			return false, err.Error()
		}
		if c := meta.FindStatusCondition(s.Status.Conditions, conditionRBACReady); c != nil {
			got = *c
		}
		return got.Status == status && got.Reason == reason && got.ObservedGeneration == s.Generation,
			fmt.Sprintf("PolicyServer %s: RBACReady is %s %s (%s), want %s %s", ps, got.Status, got.Reason, got.Message, status, reason)
	})
	return got
}

// regoModule is a policy that allows everything, as a Rego source the leader compiles.
func regoModule(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "allow.rego")
	src := "package policy\n\ndefault uid := \"\"\n\nuid := input.request.uid\n\n" +
		"main := {\"apiVersion\": \"admission.k8s.io/v1\", \"kind\": \"AdmissionReview\", \"response\": {\"uid\": uid, \"allowed\": true}}\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	return "file://" + p
}
