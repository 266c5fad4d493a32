package configpolicy

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/yaml"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/spoke-addon/compliancemessage"
)

// evaluationLog records the evaluations the controller finished, so a test can wait for "the
// policy was evaluated again" instead of sleeping.
type evaluationLog struct {
	mu     sync.Mutex
	counts map[types.NamespacedName]int
	writes map[types.NamespacedName]int
}

func (l *evaluationLog) observe(p types.NamespacedName, wrote bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts[p]++
	if wrote {
		l.writes[p]++
	}
}

func (l *evaluationLog) get(p types.NamespacedName) (evaluations, writes int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts[p], l.writes[p]
}

// startController runs the controller in a manager against cfg until the test ends and returns
// a client with strict field validation, so schema gaps fail instead of pruning silently.
// Controllers in also are set up beside it (the report feed).
func startController(t testing.TB, cfg *rest.Config, opts Options, also ...func(ctrl.Manager) error) (client.Client, *evaluationLog) {
	t.Helper()
	// The controller's logs are not the test's subject; without a logger controller-runtime
	// prints a stack trace warning instead.
	ctrl.SetLogger(logr.Discard())
	log := &evaluationLog{counts: map[types.NamespacedName]int{}, writes: map[types.NamespacedName]int{}}
	opts.observe = log.observe
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: &skip, UsePriorityQueue: new(bool)}, // no priority queue: controller-runtime#3538
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := SetupWithManager(mgr, opts); err != nil {
		t.Fatal(err)
	}
	for _, setup := range also {
		if err := setup(mgr); err != nil {
			t.Fatal(err)
		}
	}
	fleettest.StartManager(t, mgr)
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return client.WithFieldValidation(c, metav1.FieldValidationStrict), log
}

// apply creates or updates every YAML document in docs.
func apply(t testing.TB, c client.Client, docs string) {
	t.Helper()
	for _, doc := range strings.Split(docs, "\n---\n") {
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(doc), &obj.Object); err != nil {
			t.Fatalf("parse %q: %v", doc, err)
		}
		err := c.Create(context.Background(), obj)
		if apierrors.IsAlreadyExists(err) {
			// The controller under test writes status on the same object; retry when it wins.
			err = retry.RetryOnConflict(retry.DefaultBackoff, func() error {
				existing := &unstructured.Unstructured{}
				existing.SetGroupVersionKind(obj.GroupVersionKind())
				if err := c.Get(context.Background(), client.ObjectKeyFromObject(obj), existing); err != nil {
					return err
				}
				obj.SetResourceVersion(existing.GetResourceVersion())
				return c.Update(context.Background(), obj)
			})
		}
		if err != nil {
			t.Fatalf("apply %s %s: %v", obj.GetKind(), obj.GetName(), err)
		}
	}
}

func namespace(t testing.TB, c client.Client, name string, labels map[string]string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
}

// waitForPolicy polls until the policy satisfies cond and returns it; it fails after a minute
// with the last status seen. It asserts states, never how long they took.
func waitForPolicy(t testing.TB, c client.Client, ns, name string, what string, cond func(*policyv1.ConfigurationPolicy) bool) *policyv1.ConfigurationPolicy {
	t.Helper()
	p := &policyv1.ConfigurationPolicy{}
	deadline := time.Now().Add(time.Minute)
	for {
		err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p)
		if err == nil && cond(p) {
			return p
		}
		if time.Now().After(deadline) {
			status, _ := yaml.Marshal(p.Status)
			t.Fatalf("ConfigurationPolicy %s/%s never became %s (err %v); status:\n%s", ns, name, what, err, status)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// state waits until the policy, evaluated at its current generation, is in state with a message
// containing each of parts.
func state(t testing.TB, c client.Client, ns, name string, want policyv1.ComplianceState, parts ...string) *policyv1.ConfigurationPolicy {
	t.Helper()
	return waitForPolicy(t, c, ns, name, string(want)+" saying "+strings.Join(parts, ", "), func(p *policyv1.ConfigurationPolicy) bool {
		if p.Status.ComplianceState != want || p.Status.LastEvaluatedGeneration != p.Generation {
			return false
		}
		msg := compliancemessage.Of(p.Status)
		for _, part := range parts {
			if !strings.Contains(msg, part) {
				return false
			}
		}
		return true
	})
}

func getObject(t testing.TB, c client.Client, apiVersion, kind, ns, name string) (*unstructured.Unstructured, bool) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion(apiVersion)
	obj.SetKind(kind)
	err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	if apierrors.IsNotFound(err) {
		return nil, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return obj, true
}

// eventually polls cond for up to a minute; for cluster state the controller converges to.
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
