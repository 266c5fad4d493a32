package status_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub"
	"regent.dev/regent/hub/propagator"
)

var runs atomic.Int64

// env is one test's hub: a namespace for its roots, a prefix for its clusters, a hub manager.
type env struct {
	t   *testing.T
	ctx context.Context
	c   client.WithWatch
	ns  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := client.NewWithWatch(hubCluster.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(t.Name()))
	if len(ns) > 40 {
		ns = ns[len(ns)-40:]
	}
	ns = fmt.Sprintf("%s-%d", strings.Trim(ns, "-"), runs.Add(1))
	e := &env{t: t, ctx: ctx, c: c, ns: ns}
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	return e
}

// startHub runs the real hub (propagator and rollout) in-process until the test ends.
func (e *env) startHub() {
	e.t.Helper()
	mgr, err := hub.NewManager(hubCluster.Config, hub.Options{MetricsBindAddress: "0"})
	if err != nil {
		e.t.Fatalf("hub manager: %v", err)
	}
	fleettest.StartManager(e.t, mgr)
}

// cluster registers a managed cluster as OCM's registration would.
func (e *env) cluster(short string) string {
	name := e.ns + "-" + short
	e.create(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}})
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return name
}

func (e *env) create(o client.Object) {
	e.t.Helper()
	if err := e.c.Create(e.ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

// rootPolicy creates an enforcing root with one ConfigurationPolicy template and strategy.
func (e *env) rootPolicy(name string, strategy *clusterv1alpha1.RolloutStrategy, deps ...policyv1.PolicyDependency) {
	tmpl := fmt.Sprintf(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":%q},"spec":{"severity":"low","object-templates":[]}}`, name)
	e.create(&policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: policyv1.PolicySpec{RemediationAction: policyv1.Enforce, RolloutStrategy: strategy, Dependencies: deps,
			PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: []byte(tmpl)}}}},
	})
}

// bind binds root to placement and creates the Placement itself.
func (e *env) bind(root, placement string) {
	e.create(&clusterv1beta1.Placement{ObjectMeta: metav1.ObjectMeta{Name: placement, Namespace: e.ns}})
	e.create(&policyv1.PlacementBinding{
		ObjectMeta:   metav1.ObjectMeta{Name: "bind-" + root, Namespace: e.ns},
		PlacementRef: policyv1.PlacementSubject{APIGroup: clusterv1beta1.GroupName, Kind: "Placement", Name: placement},
		Subjects:     []policyv1.Subject{{APIGroup: policyv1.GroupVersion.Group, Kind: "Policy", Name: root}},
	})
}

// decide writes one decision group of placement, as OCM's placement controller would.
func (e *env) decide(placement string, group int, groupName string, clusters ...string) {
	e.t.Helper()
	d := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-decision-%d", placement, group), Namespace: e.ns,
		Labels: map[string]string{
			clusterv1beta1.PlacementLabel:          placement,
			clusterv1beta1.DecisionGroupIndexLabel: fmt.Sprint(group),
			clusterv1beta1.DecisionGroupNameLabel:  groupName,
		}}}
	e.create(d)
	for _, c := range clusters {
		d.Status.Decisions = append(d.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: c})
	}
	if err := e.c.Status().Update(e.ctx, d); err != nil {
		e.t.Fatalf("decision %s: %v", d.Name, err)
	}
}

func (e *env) root(name string) *policyv1.Policy {
	e.t.Helper()
	p := &policyv1.Policy{}
	if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: e.ns, Name: name}, p); err != nil {
		e.t.Fatalf("get root %s: %v", name, err)
	}
	return p
}

// replica returns root's replica in cluster's namespace, nil when there is none yet.
func (e *env) replica(root, cluster string) *policyv1.Policy {
	e.t.Helper()
	p := &policyv1.Policy{}
	err := e.c.Get(e.ctx, types.NamespacedName{Namespace: cluster, Name: e.ns + "." + root}, p)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

// spoke plays the managed clusters: each enforced replica not yet evaluated at its generation
// gets answer(cluster), with the template details the spoke writes ("" stays silent).
type spoke struct {
	e      *env
	root   string
	answer func(cluster string) (policyv1.ComplianceState, string)
}

func (s spoke) step(clusters ...string) {
	for _, cluster := range clusters {
		rep := s.e.replica(s.root, cluster)
		if rep == nil || rep.Spec.RemediationAction != policyv1.Enforce || rep.Status.LastEvaluatedGeneration == rep.Generation {
			continue
		}
		state, message := s.answer(cluster)
		if state == "" {
			continue
		}
		s.e.report(rep, state, message)
	}
}

// report writes a replica's status as the spoke's status sync does.
func (e *env) report(rep *policyv1.Policy, state policyv1.ComplianceState, message string) {
	e.t.Helper()
	rep.Status.ComplianceState = state
	rep.Status.LastEvaluatedGeneration = rep.Generation
	rep.Status.Details = []*policyv1.DetailsPerTemplate{{
		TemplateMeta:    metav1.ObjectMeta{Name: rootOfReplica(rep)},
		ComplianceState: state,
		History:         []policyv1.ComplianceHistory{{LastTimestamp: metav1.Now(), Message: message}},
	}}
	if err := e.c.Status().Update(e.ctx, rep); err != nil && !apierrors.IsConflict(err) {
		e.t.Fatalf("report on %s: %v", rep.Namespace, err)
	}
}

// rootOfReplica is the root's name, which is also its template's name in these tests.
func rootOfReplica(rep *policyv1.Policy) string {
	_, name, _ := strings.Cut(rep.Labels[propagator.RootPolicyLabel], ".")
	return name
}

// eventually polls cond every 100ms for a minute; the last message says what is missing.
func (e *env) eventually(what string, cond func() (bool, string)) {
	e.t.Helper()
	fleettest.Eventually(e.t, time.Minute, func() (bool, string) {
		ok, msg := cond()
		return ok, what + ": " + msg
	})
}

// syncBuffer is a bytes buffer the watch writes to while the test reads it.
type syncBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
