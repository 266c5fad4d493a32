package policyset_test

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
	"regent.dev/regent/fleet/fleettest"
)

var runs atomic.Int64

var testScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(clusterv1.Install(s))
	utilruntime.Must(clusterv1beta1.Install(s))
	utilruntime.Must(policyv1.AddToScheme(s))
	utilruntime.Must(policyv1beta1.AddToScheme(s))
	return s
}()

// env is one test's namespace on the shared hub.
type env struct {
	t   *testing.T
	ctx context.Context
	c   client.Client
	ns  string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	c, err := client.New(hubCluster.Config, client.Options{Scheme: testScheme})
	if err != nil {
		t.Fatal(err)
	}
	ns := strings.ToLower(strings.NewReplacer("_", "-", "/", "-").Replace(t.Name()))
	if len(ns) > 50 {
		ns = ns[len(ns)-50:]
	}
	e := &env{t: t, ctx: ctx, c: c, ns: fmt.Sprintf("%s-%d", strings.Trim(ns, "-"), runs.Add(1))}
	e.create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: e.ns}})
	return e
}

func (e *env) create(o client.Object) {
	e.t.Helper()
	if err := e.c.Create(e.ctx, o); err != nil {
		e.t.Fatalf("create %T %s: %v", o, o.GetName(), err)
	}
}

func (e *env) meta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Namespace: e.ns}
}

// root creates a root policy with one ConfigurationPolicy template.
func (e *env) root(name string, disabled bool) *policyv1.Policy {
	e.t.Helper()
	tmpl := fmt.Sprintf(`{"apiVersion":"policy.open-cluster-management.io/v1","kind":"ConfigurationPolicy","metadata":{"name":%q},"spec":{"severity":"low","object-templates":[]}}`, name)
	p := &policyv1.Policy{ObjectMeta: e.meta(name), Spec: policyv1.PolicySpec{Disabled: disabled, RemediationAction: policyv1.Inform,
		PolicyTemplates: []*policyv1.PolicyTemplate{{ObjectDefinition: runtime.RawExtension{Raw: []byte(tmpl)}}}}}
	e.create(p)
	return p
}

// report writes a root's status as the propagator would: selected through set by binding, with
// the given compliance per cluster ("" leaves the cluster's line without compliance).
func (e *env) report(name, binding, placement, set string, perCluster map[string]policyv1.ComplianceState) {
	e.t.Helper()
	p := &policyv1.Policy{}
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(&policyv1.Policy{ObjectMeta: e.meta(name)}), p); err != nil {
		e.t.Fatal(err)
	}
	p.Status.Placement = []*policyv1.Placement{{PlacementBinding: binding, Placement: placement, PolicySet: set}}
	p.Status.Status = nil
	for cluster, state := range perCluster {
		p.Status.Status = append(p.Status.Status, &policyv1.CompliancePerClusterStatus{ClusterName: cluster, ClusterNamespace: cluster, ComplianceState: state})
	}
	if err := e.c.Status().Update(e.ctx, p); err != nil {
		e.t.Fatalf("status of %s: %v", name, err)
	}
}

func (e *env) policySet(name string, members ...string) *policyv1beta1.PolicySet {
	// An empty list, not null: the CRD requires the field.
	s := &policyv1beta1.PolicySet{ObjectMeta: e.meta(name), Spec: policyv1beta1.PolicySetSpec{Policies: []policyv1beta1.NonEmptyString{}}}
	for _, m := range members {
		s.Spec.Policies = append(s.Spec.Policies, policyv1beta1.NonEmptyString(m))
	}
	e.create(s)
	return s
}

func (e *env) bindSet(binding, placement, set string) {
	e.create(&policyv1.PlacementBinding{ObjectMeta: e.meta(binding),
		PlacementRef: policyv1.PlacementSubject{APIGroup: clusterv1beta1.GroupName, Kind: "Placement", Name: placement},
		Subjects:     []policyv1.Subject{{APIGroup: policyv1.GroupVersion.Group, Kind: "PolicySet", Name: set}}})
}

// decide writes the placement's decisions as OCM's placement controller would, in one group.
func (e *env) decide(placement string, clusters ...string) {
	e.t.Helper()
	d := &clusterv1beta1.PlacementDecision{ObjectMeta: metav1.ObjectMeta{Name: placement + "-decision-0", Namespace: e.ns, Labels: map[string]string{
		clusterv1beta1.PlacementLabel: placement, clusterv1beta1.DecisionGroupIndexLabel: "0"}}}
	e.create(d)
	for _, c := range clusters {
		d.Status.Decisions = append(d.Status.Decisions, clusterv1beta1.ClusterDecision{ClusterName: c})
	}
	if err := e.c.Status().Update(e.ctx, d); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) getSet(name string) *policyv1beta1.PolicySet {
	e.t.Helper()
	s := &policyv1beta1.PolicySet{}
	if err := e.c.Get(e.ctx, client.ObjectKeyFromObject(&policyv1beta1.PolicySet{ObjectMeta: e.meta(name)}), s); err != nil {
		e.t.Fatal(err)
	}
	return s
}

// event waits for an Event with reason on the set whose note contains every mention.
func (e *env) event(set, reason string, mentions ...string) {
	e.t.Helper()
	fleettest.Eventually(e.t, 60*time.Second, func() (bool, string) {
		list := &eventsv1.EventList{}
		if err := e.c.List(e.ctx, list, client.InNamespace(e.ns)); err != nil {
			return false, err.Error()
		}
		var seen []string
	events:
		for _, ev := range list.Items {
			seen = append(seen, ev.Regarding.Kind+"/"+ev.Regarding.Name+" "+ev.Type+" "+ev.Reason+": "+ev.Note)
			if ev.Regarding.Name != set || ev.Regarding.Kind != "PolicySet" || ev.Reason != reason || ev.Type != "Warning" {
				continue
			}
			for _, m := range mentions {
				if !strings.Contains(ev.Note, m) {
					continue events
				}
			}
			return true, ""
		}
		return false, fmt.Sprintf("no %s event on PolicySet %s mentioning %q; events: %q", reason, set, mentions, seen)
	})
}
