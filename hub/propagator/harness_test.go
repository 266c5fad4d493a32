package propagator_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub"
	"regent.dev/regent/hub/propagator"
)

var runs atomic.Int64

var testScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(clusterv1.Install(s))
	utilruntime.Must(clusterv1beta1.Install(s))
	utilruntime.Must(clusterv1beta2.Install(s))
	utilruntime.Must(policyv1.AddToScheme(s))
	utilruntime.Must(policyv1beta1.AddToScheme(s))
	utilruntime.Must(openreportsv1alpha1.AddToScheme(s))
	return s
}()

// env is one test's view of the hub: a namespace for its roots and a prefix for its clusters.
type env struct {
	t      testing.TB
	ctx    context.Context
	c      client.WithWatch
	ns     string
	stop   func()
	stopMu sync.Mutex
	// staleDepth is the root-policy queue depth stopped hubs left in the process-wide gauge: a
	// manager stopped with an item queued never takes it out, so idleness is measured above it.
	staleDepth float64
}

func newEnv(t testing.TB) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := client.NewWithWatch(hubCluster.Config, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	// Unique per run, so -count=N and leftovers of an earlier run never meet.
	ns := strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(t.Name()))
	if len(ns) > 44 {
		ns = ns[len(ns)-44:]
	}
	ns = fmt.Sprintf("%s-%d", strings.Trim(ns, "-"), runs.Add(1))
	e := &env{t: t, ctx: ctx, c: c, ns: ns}
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	t.Cleanup(e.stopHub)
	return e
}

// startHub starts a hub manager in-process; a test may stop it and start another.
func (e *env) startHub() {
	e.t.Helper()
	e.startHubWith(hub.Options{})
}

// startHubWith starts a hub manager with opts; metrics are off.
func (e *env) startHubWith(opts hub.Options) {
	e.t.Helper()
	e.startHubOn(hubCluster.Config, opts)
}

// startHubOn starts a hub manager talking through cfg.
func (e *env) startHubOn(cfg *rest.Config, opts hub.Options) {
	e.t.Helper()
	opts.MetricsBindAddress = "0"
	mgr, err := hub.NewManager(cfg, opts)
	if err != nil {
		e.t.Fatalf("hub manager: %v", err)
	}
	e.staleDepth = controllerMetric("workqueue_depth", "name")
	ctx, cancel := context.WithCancel(e.ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			e.t.Errorf("hub manager: %v", err)
		}
	}()
	e.stopMu.Lock()
	e.stop = func() { cancel(); <-done }
	e.stopMu.Unlock()
}

func (e *env) stopHub() {
	e.stopMu.Lock()
	defer e.stopMu.Unlock()
	if e.stop != nil {
		e.stop()
		e.stop = nil
	}
}

// cluster registers a managed cluster on the hub as OCM's registration would: ManagedCluster and
// namespace. Names are prefixed with the test's namespace.
func (e *env) cluster(short string, labels map[string]string) string {
	name := e.ns + "-" + short
	e.create(&clusterv1.ManagedCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: clusterv1.ManagedClusterSpec{HubAcceptsClient: true}})
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
	return name
}

func (e *env) create(o client.Object) {
	e.t.Helper()
	if err := e.c.Create(e.ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		e.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

func (e *env) key(name string) types.NamespacedName {
	return types.NamespacedName{Namespace: e.ns, Name: name}
}

// rootPolicy returns a root policy with one ConfigurationPolicy template.
func (e *env) rootPolicy(name string, action policyv1.RemediationAction, strategy *clusterv1alpha1.RolloutStrategy) *policyv1.Policy {
	tmpl := fmt.Sprintf(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":%q},"spec":{"severity":"low","object-templates":[]}}`, name)
	p := &policyv1.Policy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{"team": "platform"}},
		Spec: policyv1.PolicySpec{
			RemediationAction: action,
			RolloutStrategy:   strategy,
			PolicyTemplates:   []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: []byte(tmpl)}}},
		},
	}
	e.create(p)
	return p
}

func (e *env) bind(name, placement string, subjects ...policyv1.Subject) *policyv1.PlacementBinding {
	b := &policyv1.PlacementBinding{
		ObjectMeta:   metav1.ObjectMeta{Name: name, Namespace: e.ns},
		PlacementRef: policyv1.PlacementSubject{APIGroup: clusterv1beta1.GroupName, Kind: "Placement", Name: placement},
		Subjects:     subjects,
	}
	e.create(b)
	return b
}

func policySubject(name string) policyv1.Subject {
	return policyv1.Subject{APIGroup: policyv1.GroupVersion.Group, Kind: "Policy", Name: name}
}

// decide writes the placement's decision for one group, as OCM's placement controller would.
func (e *env) decide(placement string, group int, groupName string, clusters ...string) {
	e.t.Helper()
	name := fmt.Sprintf("%s-decision-%d", placement, group)
	d := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns, Labels: map[string]string{
		clusterv1beta1.PlacementLabel:          placement,
		clusterv1beta1.DecisionGroupIndexLabel: fmt.Sprint(group),
		clusterv1beta1.DecisionGroupNameLabel:  groupName,
	}}}
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(d), d); apierrors.IsNotFound(err) {
		e.create(d)
	} else if err != nil {
		e.t.Fatal(err)
	}
	d.Status.Decisions = nil
	for _, c := range clusters {
		d.Status.Decisions = append(d.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: c})
	}
	if err := e.c.Status().Update(e.ctx, d); err != nil {
		e.t.Fatalf("decision %s: %v", name, err)
	}
}

// edit changes root policy name as a user would, retrying when the hub's own status write wins.
func (e *env) edit(name string, mutate func(*policyv1.Policy)) {
	e.t.Helper()
	fleettest.Edit(e.t, e.c, &policyv1.Policy{ObjectMeta: e.objectMeta(name)}, mutate)
}

func (e *env) root(name string) *policyv1.Policy {
	e.t.Helper()
	p := &policyv1.Policy{}
	if err := e.c.Get(e.ctx, e.key(name), p); err != nil {
		e.t.Fatalf("get root %s: %v", name, err)
	}
	return p
}

// replicas returns the replicas of root by cluster.
func (e *env) replicas(root string) map[string]*policyv1.Policy {
	e.t.Helper()
	list := &policyv1.PolicyList{}
	if err := e.c.List(e.ctx, list, client.MatchingLabels{propagator.RootPolicyLabel: e.ns + "." + root}); err != nil {
		e.t.Fatalf("list replicas: %v", err)
	}
	out := map[string]*policyv1.Policy{}
	for i := range list.Items {
		out[list.Items[i].Namespace] = &list.Items[i]
	}
	return out
}

// answer plays the spoke of cluster: it reports compliance for the replica's current generation.
func (e *env) answer(root, cluster string, state policyv1.ComplianceState) {
	e.t.Helper()
	rep := &policyv1.Policy{}
	if err := e.c.Get(e.ctx, types.NamespacedName{Namespace: cluster, Name: e.ns + "." + root}, rep); err != nil {
		e.t.Fatalf("get replica on %s: %v", cluster, err)
	}
	patch := fmt.Sprintf(`{"status":{"compliant":%q,"lastEvaluatedGeneration":%d}}`, state, rep.Generation)
	if err := e.c.Status().Patch(e.ctx, rep, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		e.t.Fatalf("answer for %s: %v", cluster, err)
	}
}

// eventually polls cond until it holds; the message of the last failed attempt is reported.
func (e *env) eventually(what string, cond func() (bool, string)) {
	e.t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	last := ""
	for time.Now().Before(deadline) {
		ok, msg := cond()
		if ok {
			return
		}
		last = msg
		time.Sleep(50 * time.Millisecond)
	}
	e.t.Fatalf("%s: still not true after 60s: %s", what, last)
}

// statuses returns the root's per-cluster rollout status.
func statuses(root *policyv1.Policy) map[string]policyv1.RolloutStatus {
	out := map[string]policyv1.RolloutStatus{}
	for _, l := range root.Status.Status {
		out[l.ClusterName] = l.RolloutStatus
	}
	return out
}

func withStatus(root *policyv1.Policy, s policyv1.RolloutStatus) []string {
	var out []string
	for _, l := range root.Status.Status {
		if l.RolloutStatus == s {
			out = append(out, l.ClusterName)
		}
	}
	return out
}

func (e *env) objectMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: e.ns}
}
