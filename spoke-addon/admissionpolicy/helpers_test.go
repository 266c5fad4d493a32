package admissionpolicy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
)

// Every test that starts a hub runs in parallel with the others: each owns its apiserver and
// names everything it creates, and the tests spend most of their time waiting on controllers and
// the apiserver (run one after the other, the package kept 31 % of 2 cores busy and was the
// longest chain in make test).
const testNamespace = "regent-system"

// testCA stands in for a policy server's serving CA; the apiserver only stores it here, as no
// test policy's rules match a request the tests make.
var testCA = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")

// startController runs the controllers against cfg until the test ends, webhooks pointing at
// a local URL as in a local fleet, and returns a client with strict field validation.
func startController(t testing.TB, cfg *rest.Config, tweaks ...func(*Options)) client.Client {
	t.Helper()
	ctrl.SetLogger(logr.Discard())
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip, UsePriorityQueue: new(bool)}, // no priority queue: controller-runtime#3538
	})
	if err != nil {
		t.Fatal(err)
	}
	opts := Options{
		Namespace:  testNamespace,
		WebhookURL: func(ps string) string { return "https://127.0.0.1:9443/" + ps },
		CABundle:   func(context.Context, string) ([]byte, error) { return testCA, nil },
	}
	for _, tweak := range tweaks {
		tweak(&opts)
	}
	if err := SetupWithManager(mgr, opts); err != nil {
		t.Fatal(err)
	}
	fleettest.StartManager(t, mgr)
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: testNamespace}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return client.WithFieldValidation(c, metav1.FieldValidationStrict)
}

// clusterPolicy is a ClusterAdmissionPolicy on pods that no test creates, so its webhook, which
// points at nothing, is never called.
func clusterPolicy(name, ps string) *kubewardenv1.ClusterAdmissionPolicy {
	ignore := admissionregistrationv1.Ignore
	return &kubewardenv1.ClusterAdmissionPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: kubewardenv1.ClusterAdmissionPolicySpec{PolicySpec: kubewardenv1.PolicySpec{
			PolicyServer: ps, Module: "file:///policies/v1.wasm", FailurePolicy: &ignore, BackgroundAudit: true,
			Rules: []admissionregistrationv1.RuleWithOperations{{
				Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
				Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"pods"}},
			}},
		}},
	}
}

// liveLease plays a replica of ps holding its Lease for an hour; expiredLease one gone an hour ago.
func replicaLease(t testing.TB, c client.Client, ps string, n int32, renewed time.Time, seconds int32) {
	t.Helper()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: testNamespace, Name: fmt.Sprintf("%s%d", replicaLeasePrefix(ps), n)}}
	holder := fmt.Sprint(n)
	rt := metav1.NewMicroTime(renewed)
	l.Spec = coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &rt, LeaseDurationSeconds: &seconds}
	if err := c.Create(context.Background(), l); err != nil {
		t.Fatal(err)
	}
}

func liveLeases(t testing.TB, c client.Client, ps string, replicas ...int32) {
	t.Helper()
	for _, n := range replicas {
		replicaLease(t, c, ps, n, time.Now(), 3600)
	}
}

// report plays the policy server: it merges the leader's conditions (by type) and the replicas'
// reports (by replica) into a revision's status, as the leader and the replicas do.
func report(t testing.TB, c client.Client, revision string, reports ...any) {
	t.Helper()
	eventually(t, "revision "+revision+" takes the report", func() bool {
		rev := &kubewardenv1.PolicyRevision{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: testNamespace, Name: revision}, rev); err != nil {
			return false
		}
		for _, x := range reports {
			switch c := x.(type) {
			case kubewardenv1.PolicyCondition:
				c.LastTransitionTime = metav1.Now()
				if c.PolicyGeneration == 0 {
					c.PolicyGeneration = rev.Spec.PolicyGeneration
				}
				rev.Status.Conditions = slices.DeleteFunc(rev.Status.Conditions, func(o kubewardenv1.PolicyCondition) bool { return o.Type == c.Type })
				rev.Status.Conditions = append(rev.Status.Conditions, c)
			case kubewardenv1.ReplicaStatus:
				c.LastTransitionTime = metav1.Now()
				if c.PolicyGeneration == 0 {
					c.PolicyGeneration = rev.Spec.PolicyGeneration
				}
				rev.Status.Replicas = slices.DeleteFunc(rev.Status.Replicas, func(o kubewardenv1.ReplicaStatus) bool { return o.Replica == c.Replica })
				rev.Status.Replicas = append(rev.Status.Replicas, c)
			default:
				t.Fatalf("report: %T", x)
			}
		}
		err := c.Status().Update(context.Background(), rev)
		if err != nil {
			t.Logf("report to %s: %v", revision, err)
		}
		return err == nil
	})
}

func initializedTrue() kubewardenv1.PolicyCondition {
	return kubewardenv1.PolicyCondition{Type: kubewardenv1.ConditionInitialized, Status: metav1.ConditionTrue, Reason: "Initialized", Message: "signed"}
}

func readyOn(status metav1.ConditionStatus, replicas ...int32) []any {
	var out []any
	for _, n := range replicas {
		out = append(out, kubewardenv1.ReplicaStatus{Replica: n, Ready: status, Reason: "Loaded"})
	}
	return out
}

// waitForPolicy polls the ClusterAdmissionPolicy until cond holds; it asserts states, never how
// long they took.
func waitForPolicy(t testing.TB, c client.Client, name, what string, cond func(*kubewardenv1.ClusterAdmissionPolicy) bool) *kubewardenv1.ClusterAdmissionPolicy {
	t.Helper()
	p := &kubewardenv1.ClusterAdmissionPolicy{}
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Get(context.Background(), client.ObjectKey{Name: name}, p)
		if err == nil && cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			status, _ := yaml.Marshal(p.Status)
			t.Fatalf("ClusterAdmissionPolicy %s never %s (err %v); generation %d, status:\n%s", name, what, err, p.Generation, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// readyReplicas lists the replicas whose report on the policy has readiness status.
func readyReplicas(st kubewardenv1.PolicyStatus, status metav1.ConditionStatus) string {
	var out []string
	for _, rs := range st.Replicas {
		if rs.Ready == status {
			out = append(out, fmt.Sprint(rs.Replica))
		}
	}
	return strings.Join(out, ",")
}

// webhookPath is the URL of the policy's validating webhook, "" when there is none.
func webhookURL(t testing.TB, c client.Client, policyName string) string {
	t.Helper()
	w := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	err := c.Get(context.Background(), client.ObjectKey{Name: webhookName(policyName)}, w)
	if apierrors.IsNotFound(err) {
		return ""
	}
	if err != nil {
		t.Fatal(err)
	}
	return *w.Webhooks[0].ClientConfig.URL
}

func revisionGenerations(t testing.TB, c client.Client, policyName string) []int64 {
	t.Helper()
	list := &kubewardenv1.PolicyRevisionList{}
	if err := c.List(context.Background(), list, client.InNamespace(testNamespace), client.MatchingLabels{PolicyLabel: policyName}); err != nil {
		t.Fatal(err)
	}
	var gens []int64
	for _, r := range list.Items {
		gens = append(gens, r.Spec.PolicyGeneration)
	}
	return gens
}

// eventually polls cond for up to a minute.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func update(t testing.TB, c client.Client, obj client.Object, change func()) {
	t.Helper()
	eventually(t, "update "+obj.GetName(), func() bool {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return false
		}
		change()
		return c.Update(context.Background(), obj) == nil
	})
}

// revisionCondition is the revision's condition of type typ (Scheduled or Initialized).
func revisionCondition(rev *kubewardenv1.PolicyRevision, typ string) *kubewardenv1.PolicyCondition {
	for i := range rev.Status.Conditions {
		if rev.Status.Conditions[i].Type == typ {
			return &rev.Status.Conditions[i]
		}
	}
	return nil
}
