package propagator_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/fleet/fleettest"
	"regent.dev/regent/hub"
	"regent.dev/regent/hub/propagator"
	"regent.dev/regent/hub/rollout"
)

// requests records the hub's apiserver requests that are not reads, with their answers' codes.
// A review (the SubjectAccessReviews of hub templates read with a service account) is a question
// sent as a POST, which stores nothing: it is no write.
type requests struct {
	mu     sync.Mutex
	writes []string
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// config returns the hub's rest.Config with every write it sends recorded.
func (q *requests) config() *rest.Config {
	cfg := rest.CopyConfig(hubCluster.Config)
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
			resp, err := rt.RoundTrip(r)
			if r.Method != http.MethodGet && !strings.HasPrefix(r.URL.Path, "/apis/authorization.k8s.io/") {
				code := 0
				if resp != nil {
					code = resp.StatusCode
				}
				q.mu.Lock()
				q.writes = append(q.writes, fmt.Sprintf("%s %s %d", r.Method, r.URL.Path, code))
				q.mu.Unlock()
			}
			return resp, err
		})
	}
	return cfg
}

// matching returns the recorded writes whose path contains every part.
func (q *requests) matching(parts ...string) []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	var out []string
	for _, w := range q.writes {
		ok := true
		for _, p := range parts {
			ok = ok && strings.Contains(w, p)
		}
		if ok {
			out = append(out, w)
		}
	}
	return out
}

func (q *requests) all() []string { return q.matching() }

// controllerMetric sums a controller-runtime metric of the root-policy controller.
func controllerMetric(name, label string) float64 {
	families, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		return -1
	}
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if !hasLabel(m, label, "root-policy") {
				continue
			}
			switch {
			case m.Counter != nil:
				sum += m.Counter.GetValue()
			case m.Gauge != nil:
				sum += m.Gauge.GetValue()
			}
		}
	}
	return sum
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// awaitIdle waits until the hub reconciled at least n roots since reconciles was read and has
// nothing queued or running: every root then was looked at with a synced cache (the controller
// starts its workers only once the cache has synced, with every object's event queued).
func (e *env) awaitIdle(reconciles float64, n int) {
	e.t.Helper()
	e.eventually("hub idle", func() (bool, string) {
		done := controllerMetric("controller_runtime_reconcile_total", "controller") - reconciles
		depth := controllerMetric("workqueue_depth", "name") - e.staleDepth
		active := controllerMetric("controller_runtime_active_workers", "controller")
		return done >= float64(n) && depth == 0 && active == 0,
			fmt.Sprintf("%v reconciles, queue %v, active %v", done, depth, active)
	})
}

// The common case costs one request per replica: its creation. The initial rollout status is
// not written (an absent one means it), neither for strategy All nor for the first pass of a
// progressive rollout, and every reader sees the same status the root records.
func TestHubWrites_OneRequestPerReplica(t *testing.T) {
	e := newEnv(t)
	clusters := []string{e.cluster("c1", nil), e.cluster("c2", nil), e.cluster("c3", nil)}
	e.rootPolicy("all", policyv1.Enforce, nil)
	e.rootPolicy("prog", policyv1.Enforce, progressive(1, clusterv1alpha1.RolloutConfig{}))
	e.bind("b", "pl", policySubject("all"), policySubject("prog"))
	e.decide("pl", 0, "", clusters...)
	var q requests
	e.startHubOn(q.config(), hub.Options{})
	e.eventually("rollouts recorded", func() (bool, string) {
		a, p := e.root("all"), e.root("prog")
		return len(withStatus(a, policyv1.RolloutProgressing)) == 3 && len(withStatus(p, policyv1.RolloutProgressing)) == 1 &&
				len(withStatus(p, policyv1.RolloutToApply)) == 2,
			fmt.Sprintf("all %v, prog %v", statuses(a), statuses(p))
	})
	before := controllerMetric("controller_runtime_reconcile_total", "controller")
	e.touchBinding("b")
	e.awaitIdle(before, 1)

	for _, root := range []string{"all", "prog"} {
		recorded := statuses(e.root(root))
		for cluster, rep := range e.replicas(root) {
			if rep.Status.RolloutStatus != "" {
				t.Errorf("%s on %s: rollout status %q written, want none (the initial one)", root, cluster, rep.Status.RolloutStatus)
			}
			if got := rep.EffectiveRolloutStatus(); got != recorded[cluster] {
				t.Errorf("%s on %s: replica reads as %s, root records %s", root, cluster, got, recorded[cluster])
			}
		}
	}
	perCluster := map[string][]string{}
	for _, cluster := range clusters {
		perCluster[cluster] = q.matching("/namespaces/" + cluster + "/policies")
	}
	turns := 0
	for cluster, ws := range perCluster {
		creates, updates := 0, 0
		for _, w := range ws {
			switch {
			case strings.HasPrefix(w, "POST ") && strings.HasSuffix(w, " 201"):
				creates++
			case strings.HasPrefix(w, "PUT ") && strings.Contains(w, "/policies/"+e.ns+".prog ") && !strings.Contains(w, "/status"):
				updates++
			default:
				t.Errorf("%s: unexpected write %s", cluster, w)
			}
		}
		if creates != 2 {
			t.Errorf("%s: %d creates, want 2 (one per root): %v", cluster, creates, ws)
		}
		turns += updates
	}
	// prog's only turn (maxConcurrency 1) is its spec turned to enforce: one update, no status.
	if turns != 1 {
		t.Errorf("%d replica updates for prog's turn, want 1: %v", turns, perCluster)
	}
}

// touchBinding makes the hub reconcile the binding's roots with nothing changed: bindings'
// annotations reach no replica.
func (e *env) touchBinding(name string) {
	e.t.Helper()
	fleettest.Edit(e.t, e.c, &policyv1.PlacementBinding{ObjectMeta: e.objectMeta(name)}, func(b *policyv1.PlacementBinding) {
		b.Annotations = map[string]string{"touched": fmt.Sprint(len(b.Annotations))}
	})
}

// A restarted hub with nothing changed writes nothing: not a replica, not a root status, not an
// event; and every replica keeps its resourceVersion.
func TestHubWrites_RestartOnASettledFleetWritesNothing(t *testing.T) {
	e := newEnv(t)
	clusters := []string{e.cluster("c1", nil), e.cluster("c2", nil), e.cluster("c3", nil)}
	e.rootPolicy("all", policyv1.Enforce, nil)
	e.rootPolicy("inform", policyv1.Inform, nil)
	e.rootPolicy("prog", policyv1.Enforce, progressive(1, clusterv1alpha1.RolloutConfig{}))
	e.bind("b", "pl", policySubject("all"), policySubject("inform"), policySubject("prog"))
	e.decide("pl", 0, "", clusters...)
	e.startHub()
	e.eventually("fleet settled", func() (bool, string) {
		p := e.root("prog")
		return len(e.replicas("all")) == 3 && len(e.replicas("inform")) == 3 && len(withStatus(p, policyv1.RolloutProgressing)) == 1,
			fmt.Sprintf("prog %v", statuses(p))
	})
	// Two clusters answered. Compliant reads as Succeeded from the replica itself: nothing is
	// written. NonCompliant on a root that only informs is a success the replica does not imply:
	// that status is written, and a restart must not write it again either.
	e.answer("all", clusters[0], policyv1.Compliant)
	e.answer("inform", clusters[0], policyv1.NonCompliant)
	e.eventually("answers recorded", func() (bool, string) {
		a, i := e.replicas("all")[clusters[0]], e.replicas("inform")[clusters[0]]
		return statuses(e.root("all"))[clusters[0]] == policyv1.RolloutSucceeded && a.EffectiveRolloutStatus() == policyv1.RolloutSucceeded &&
				i.Status.RolloutStatus == policyv1.RolloutSucceeded,
			fmt.Sprintf("all %q, inform %q", a.EffectiveRolloutStatus(), i.Status.RolloutStatus)
	})
	before := controllerMetric("controller_runtime_reconcile_total", "controller")
	e.touchBinding("b")
	e.awaitIdle(before, 1)
	e.stopHub()
	versions := map[string]string{}
	for _, root := range []string{"all", "inform", "prog"} {
		versions[root] = e.root(root).ResourceVersion
		for cluster, rep := range e.replicas(root) {
			versions[root+"/"+cluster] = rep.ResourceVersion
		}
	}

	var q requests
	before = controllerMetric("controller_runtime_reconcile_total", "controller")
	e.startHubOn(q.config(), hub.Options{})
	e.awaitIdle(before, 3)
	if w := q.all(); len(w) != 0 {
		t.Errorf("a restart with nothing changed wrote %d times: %v", len(w), w)
	}
	for _, root := range []string{"all", "inform", "prog"} {
		if got := e.root(root).ResourceVersion; got != versions[root] {
			t.Errorf("root %s changed on restart: resourceVersion %s, was %s", root, got, versions[root])
		}
		for cluster, rep := range e.replicas(root) {
			if rep.ResourceVersion != versions[root+"/"+cluster] {
				t.Errorf("replica %s on %s changed on restart", root, cluster)
			}
		}
	}
}

// indexReader reads the apiserver as the hub's cache would be read: the reconciler's lookups of a
// root's replicas by index become label selections. blind plays a cache that has not seen the
// replicas (nor reports) yet: those lists come back empty. root, when set, is returned for every
// Get of that root: a cache behind the hub's own writes.
type indexReader struct {
	client.Reader
	blind bool
	root  *policyv1.Policy
}

func (b *indexReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if p, ok := obj.(*policyv1.Policy); ok && b.root != nil && key == client.ObjectKeyFromObject(b.root) {
		b.root.DeepCopyInto(p)
		return nil
	}
	return b.Reader.Get(ctx, key, obj, opts...)
}

func (b *indexReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	o := &client.ListOptions{}
	o.ApplyOptions(opts)
	if o.FieldSelector == nil || o.FieldSelector.Empty() {
		return b.Reader.List(ctx, list, opts...)
	}
	root, byRoot := o.FieldSelector.RequiresExactMatch("regent.dev/root-policy")
	if b.blind || !byRoot {
		return nil
	}
	return b.Reader.List(ctx, list, client.MatchingLabels{propagator.RootPolicyLabel: root})
}

func (e *env) reconciler(cfg *rest.Config, reader client.Reader) *propagator.Reconciler {
	e.t.Helper()
	c, err := client.New(cfg, client.Options{Scheme: testScheme})
	if err != nil {
		e.t.Fatal(err)
	}
	return &propagator.Reconciler{Client: c, Reader: reader, Planner: rollout.NewPlanner(clock.RealClock{}),
		Recorder: events.NewFakeRecorder(1000), Workers: 4}
}

// A replica the cache has not seen yet is created again and answered "already exists": that is no
// failure (no error, no backoff, nothing reported on the root), and the replica is left as it is.
func TestHubWrites_AlreadyExistsOfAnUnseenReplicaIsNoFailure(t *testing.T) {
	e := newEnv(t)
	clusters := []string{e.cluster("c1", nil), e.cluster("c2", nil)}
	e.rootPolicy("p", policyv1.Enforce, nil)
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", clusters...)
	direct, err := client.New(hubCluster.Config, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	req := ctrl.Request{NamespacedName: e.key("p")}
	if _, err := e.reconciler(hubCluster.Config, &indexReader{Reader: direct, blind: true}).Reconcile(e.ctx, req); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	reps := e.replicas("p")
	if len(reps) != 2 {
		t.Fatalf("%d replicas after the first reconcile, want 2", len(reps))
	}

	// A second process whose cache is behind: both creates are answered "already exists".
	var q requests
	behind := e.reconciler(q.config(), &indexReader{Reader: direct, blind: true})
	res, err := behind.Reconcile(e.ctx, req)
	if err != nil {
		t.Fatalf("reconcile with a cache behind: %v", err)
	}
	if res.RequeueAfter <= 0 {
		t.Errorf("no requeue: the replicas the cache has not seen are never compared")
	}
	if got := q.matching("/policies", " 409"); len(got) != len(clusters) {
		t.Errorf("creates answered already exists: %v, want one per cluster", got)
	}
	for _, w := range q.all() {
		if !strings.HasSuffix(w, " 409") {
			t.Errorf("unexpected write %s", w)
		}
	}
	// Looked at again before the cache caught up: the creates are not sent again.
	n := len(q.all())
	if _, err := behind.Reconcile(e.ctx, req); err != nil {
		t.Fatalf("second reconcile with a cache behind: %v", err)
	}
	if w := q.all()[n:]; len(w) != 0 {
		t.Errorf("replicas the cache has not seen yet were written again: %v", w)
	}
	if c := meta.FindStatusCondition(e.root("p").Status.Conditions, "ReplicasWritten"); c != nil {
		t.Errorf("root reports %s: %s", c.Reason, c.Message)
	}
	for cluster, rep := range e.replicas("p") {
		if rep.ResourceVersion != reps[cluster].ResourceVersion {
			t.Errorf("replica on %s changed", cluster)
		}
	}
}

// The root's status is patched without a resourceVersion, so it never conflicts; a reconcile whose
// cached root predates the hub's own last status patch waits for the cache instead of deciding on
// an older record.
func TestHubWrites_RootStatusNeverConflictsNorRegresses(t *testing.T) {
	e := newEnv(t)
	clusters := []string{e.cluster("c1", nil), e.cluster("c2", nil)}
	e.rootPolicy("p", policyv1.Enforce, nil)
	e.bind("b", "pl", policySubject("p"))
	e.decide("pl", 0, "", clusters...)
	direct, err := client.New(hubCluster.Config, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	stale := e.root("p")
	var q requests
	frozen := &indexReader{Reader: direct, root: stale}
	r := e.reconciler(q.config(), frozen)
	req := ctrl.Request{NamespacedName: e.key("p")}
	if _, err := r.Reconcile(e.ctx, req); err != nil {
		t.Fatalf("first reconcile: %v", err)
	}
	if got := q.matching("/policies/p/status", "PATCH", " 200"); len(got) != 1 {
		t.Fatalf("root status patches %v, want one", got)
	}
	written := e.root("p")
	if written.ResourceVersion == stale.ResourceVersion {
		t.Fatal("the root status was not written")
	}

	// The cache still shows the root from before that patch: nothing is decided on it.
	n := len(q.all())
	if _, err := r.Reconcile(e.ctx, req); err != nil {
		t.Fatalf("reconcile on a root the cache has not caught up with: %v", err)
	}
	if w := q.all()[n:]; len(w) != 0 {
		t.Errorf("writes from a root older than the hub's own status patch: %v", w)
	}

	// Another process (a restarted hub) whose cache shows the root from before both that patch
	// and a user's edit: its status write still goes through, where an update with that
	// resourceVersion would conflict.
	e.edit("p", func(p *policyv1.Policy) { p.Annotations = map[string]string{"touched": "1"} })
	stale.Status = policyv1.PolicyStatus{}
	var q2 requests
	if _, err := e.reconciler(q2.config(), &indexReader{Reader: direct, root: stale}).Reconcile(e.ctx, req); err != nil {
		t.Fatalf("reconcile on a stale root: %v", err)
	}
	if got := q2.matching("/policies/p/status", "PATCH", " 200"); len(got) != 1 {
		t.Errorf("root status patches %v, want one", q2.all())
	}
	for _, w := range append(q.all(), q2.all()...) {
		if strings.HasSuffix(w, " 409") {
			t.Errorf("conflict: %s", w)
		}
	}
	if got, want := statuses(e.root("p")), statuses(written); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("record %v, want %v as written", got, want)
	}
}
