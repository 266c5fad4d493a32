package policyset_test

import (
	"context"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
	"regent.dev/regent/hub/policyset"
)

// statusWrites counts the status writes a reconciler issues.
type statusWrites struct {
	client.Client
	n *int
}

func (c statusWrites) Status() client.SubResourceWriter {
	return countingWriter{c.Client.Status(), c.n}
}

type countingWriter struct {
	client.SubResourceWriter
	n *int
}

func (w countingWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	*w.n++
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

func (w countingWriter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	*w.n++
	return w.SubResourceWriter.Update(ctx, obj, opts...)
}

// reconciler returns a set reconciler that reads the apiserver directly, so a test calls
// Reconcile itself and sees exactly what one pass does; writes are counted in *writes.
func (e *env) reconciler(writes *int) *policyset.Reconciler {
	e.t.Helper()
	cs, err := kubernetes.NewForConfig(hubCluster.Config)
	if err != nil {
		e.t.Fatal(err)
	}
	b := events.NewBroadcaster(&events.EventSinkImpl{Interface: cs.EventsV1()})
	b.StartRecordingToSink(e.ctx.Done())
	e.t.Cleanup(b.Shutdown)
	return &policyset.Reconciler{Client: statusWrites{e.c, writes}, Reader: e.c, Recorder: b.NewRecorder(testScheme, "policyset-test")}
}

func (e *env) reconcile(r *policyset.Reconciler, set string) *policyv1beta1.PolicySet {
	e.t.Helper()
	if _, err := r.Reconcile(e.ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&policyv1beta1.PolicySet{ObjectMeta: e.meta(set)})}); err != nil {
		e.t.Fatalf("reconcile %s: %v", set, err)
	}
	return e.getSet(set)
}

const (
	c1, c2, elsewhere = "c1", "c2", "elsewhere"
)

// TestPolicySetStatus_FollowsMembers sets up a set bound to a placement choosing c1 and c2, and
// checks its status for each combination of member states OCM distinguishes.
func TestPolicySetStatus_FollowsMembers(t *testing.T) {
	type memberState struct {
		disabled bool
		missing  bool
		// perCluster is the member's compliance per cluster as its root status shows it.
		perCluster map[string]policyv1.ComplianceState
	}
	compliant := map[string]policyv1.ComplianceState{c1: policyv1.Compliant, c2: policyv1.Compliant}
	cases := []struct {
		name        string
		members     map[string]memberState
		wantState   policyv1.ComplianceState
		wantMessage string
		wantEvent   string
	}{
		{name: "every member compliant", members: map[string]memberState{"a": {perCluster: compliant}, "b": {perCluster: compliant}},
			wantState: policyv1.Compliant, wantMessage: "All policies are reporting status"},
		{name: "one member noncompliant on one cluster",
			members: map[string]memberState{"a": {perCluster: compliant},
				"b": {perCluster: map[string]policyv1.ComplianceState{c1: policyv1.Compliant, c2: policyv1.NonCompliant}}},
			wantState: policyv1.NonCompliant, wantMessage: "All policies are reporting status"},
		{name: "one member pending",
			members: map[string]memberState{"a": {perCluster: compliant},
				"b": {perCluster: map[string]policyv1.ComplianceState{c1: policyv1.Pending, c2: policyv1.Compliant}}},
			wantState: policyv1.Pending, wantMessage: "Policies awaiting pending dependencies: b"},
		{name: "noncompliant wins over pending",
			members: map[string]memberState{"a": {perCluster: map[string]policyv1.ComplianceState{c1: policyv1.NonCompliant}},
				"b": {perCluster: map[string]policyv1.ComplianceState{c1: policyv1.Pending}}},
			wantState: policyv1.NonCompliant, wantMessage: "Policies awaiting pending dependencies: b"},
		{name: "a disabled member does not count",
			members: map[string]memberState{"a": {perCluster: compliant},
				"b": {disabled: true, perCluster: map[string]policyv1.ComplianceState{c1: policyv1.NonCompliant}}},
			wantState: policyv1.Compliant, wantMessage: "Disabled policies: b"},
		{name: "a missing member is named and an event says so",
			members:   map[string]memberState{"a": {perCluster: compliant}, "b": {missing: true}},
			wantState: policyv1.Compliant, wantMessage: "Deleted policies: b", wantEvent: "Policy b is in PolicySet set but could not be found in namespace"},
		{name: "compliance on clusters the set does not select does not count",
			members: map[string]memberState{"a": {perCluster: compliant},
				"b": {perCluster: map[string]policyv1.ComplianceState{elsewhere: policyv1.NonCompliant}}},
			wantState: "", wantMessage: "No status provided while awaiting policy status: b"},
		{name: "every message part in the order OCM gives them",
			members: map[string]memberState{"a": {perCluster: map[string]policyv1.ComplianceState{c1: policyv1.Pending}},
				"b": {disabled: true}, "c": {perCluster: map[string]policyv1.ComplianceState{c1: ""}}, "d": {missing: true}},
			wantState:   "",
			wantMessage: "Policies awaiting pending dependencies: a; Disabled policies: b; No status provided while awaiting policy status: c; Deleted policies: d"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.decide("pl", c1, c2)
			e.bindSet("bind", "pl", "set")
			var names []string
			for _, n := range []string{"a", "b", "c", "d"} {
				m, ok := tc.members[n]
				if !ok {
					continue
				}
				names = append(names, n)
				if m.missing {
					continue
				}
				e.root(n, m.disabled)
				e.report(n, "bind", "pl", "set", m.perCluster)
			}
			e.policySet("set", names...)
			writes := 0
			got := e.reconcile(e.reconciler(&writes), "set").Status
			if got.Compliant != tc.wantState || got.StatusMessage != tc.wantMessage {
				t.Errorf("status = %q, %q; want %q, %q", got.Compliant, got.StatusMessage, tc.wantState, tc.wantMessage)
			}
			if len(got.Placement) != 1 || got.Placement[0] != (policyv1beta1.PolicySetStatusPlacement{PlacementBinding: "bind", Placement: "pl"}) {
				t.Errorf("placement = %+v, want binding bind to placement pl", got.Placement)
			}
			if tc.wantEvent != "" {
				e.event("set", "PolicyNotFound", tc.wantEvent, e.ns)
			}
		})
	}
}

func TestPolicySetStatus_EmptySetHasEmptyStatus(t *testing.T) {
	e := newEnv(t)
	e.policySet("set")
	writes := 0
	got := e.reconcile(e.reconciler(&writes), "set").Status
	if got.Compliant != "" || got.StatusMessage != "" || len(got.Placement) != 0 || writes != 0 {
		t.Errorf("status = %+v after %d writes, want empty and no write", got, writes)
	}
}

// TestPolicySetStatus_UnchangedIsNotWritten reconciles twice with nothing changed in between: the
// second pass must not write, then a member's change must be written once.
func TestPolicySetStatus_UnchangedIsNotWritten(t *testing.T) {
	e := newEnv(t)
	e.decide("pl", c1)
	e.bindSet("bind", "pl", "set")
	e.root("a", false)
	e.report("a", "bind", "pl", "set", map[string]policyv1.ComplianceState{c1: policyv1.Compliant})
	e.policySet("set", "a")
	writes := 0
	r := e.reconciler(&writes)
	if got := e.reconcile(r, "set").Status.Compliant; got != policyv1.Compliant || writes != 1 {
		t.Fatalf("first pass: compliant %q after %d writes, want Compliant after 1", got, writes)
	}
	if e.reconcile(r, "set"); writes != 1 {
		t.Errorf("second pass with nothing changed wrote the status (%d writes in all)", writes)
	}
	e.report("a", "bind", "pl", "set", map[string]policyv1.ComplianceState{c1: policyv1.NonCompliant})
	if got := e.reconcile(r, "set").Status.Compliant; got != policyv1.NonCompliant || writes != 2 {
		t.Errorf("after a member changed: compliant %q after %d writes, want NonCompliant after 2", got, writes)
	}
}
