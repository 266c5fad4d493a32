package propagator

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/rollout"
)

// gateFixture is a root rolled out to five clusters: a, b and c in their turn (Progressing, the
// enforce spec), d and e waiting (ToApply, the inform spec), and the replica cache it is read
// against.
type gateFixture struct {
	root   *policyv1.Policy
	plan   plan
	cache  map[string]*CachedReplica
	key    types.NamespacedName
	gate   answerGate
	behind bool
}

const (
	enforceHash = "sha-enforce"
	informHash  = "sha-inform"
)

func newGateFixture(strategy clusterv1alpha1.RolloutType, action policyv1.RemediationAction) *gateFixture {
	enforced, informed := &policyv1.PolicySpec{}, &policyv1.PolicySpec{}
	f := &gateFixture{
		root: &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "p"},
			Spec: policyv1.PolicySpec{RemediationAction: action, RolloutStrategy: &clusterv1alpha1.RolloutStrategy{Type: strategy}}},
		plan: plan{decision: rollout.Decision{Clusters: map[string]rollout.Cluster{}, Aggregate: policyv1.RolloutProgressing},
			desired: map[string]*policyv1.PolicySpec{}, compliance: map[string]policyv1.ComplianceState{},
			hash: map[*policyv1.PolicySpec]string{enforced: enforceHash, informed: informHash}},
		cache: map[string]*CachedReplica{},
		key:   types.NamespacedName{Namespace: "team", Name: "p"},
	}
	for _, name := range []string{"a", "b", "c", "d", "e"} {
		status, spec, hash := policyv1.RolloutProgressing, enforced, enforceHash
		if name >= "d" {
			status, spec, hash = policyv1.RolloutToApply, informed, informHash
		}
		f.plan.decision.Clusters[name] = rollout.Cluster{Status: status}
		f.plan.desired[name] = spec
		f.cache[name] = &CachedReplica{name: "team.p", namespace: name, specHash: hash, generation: 1,
			labels: map[string]string{RootPolicyLabel: "team.p"}}
	}
	return f
}

// answered is the cluster's replica after it reported state on the spec it carries.
func (f *gateFixture) answered(cluster string, state policyv1.ComplianceState) *CachedReplica {
	rep := *f.cache[cluster]
	rep.compliance, rep.lastEvaluatedGeneration = state, rep.generation
	return &rep
}

// plannedWith makes the plan the one a reconcile reading the cache now would make of answers.
func (f *gateFixture) plannedWith(answers map[string]policyv1.ComplianceState) *gateFixture {
	for cluster, state := range answers {
		f.cache[cluster] = f.answered(cluster, state)
		f.plan.compliance[cluster] = state
	}
	return f
}

func (f *gateFixture) record(hold time.Duration) *gateFixture {
	f.behind = f.recordIn(&f.gate, hold)
	return f
}

func (f *gateFixture) recordIn(g *answerGate, hold time.Duration) bool {
	return g.record(f.key, f.root, f.plan, hold, func(cluster string) *CachedReplica { return f.cache[cluster] })
}

// answer delivers cluster's answer to the gate as the cache's update event would, and the cache
// takes it.
func (f *gateFixture) answer(cluster string, state policyv1.ComplianceState) (answerRoute, time.Duration) {
	updated := f.answered(cluster, state)
	route, delay := f.gate.route(f.key, f.cache[cluster], updated)
	f.cache[cluster] = updated
	return route, delay
}

func TestAnswerGate_OnlyTheLastAnswerOfATurnMovesAGroupRolloutOn(t *testing.T) {
	f := newGateFixture(clusterv1alpha1.ProgressivePerGroup, policyv1.Enforce).
		plannedWith(map[string]policyv1.ComplianceState{"d": policyv1.NonCompliant, "e": policyv1.NonCompliant}).record(30 * time.Second)
	if f.behind {
		t.Fatal("a plan of the cache as it is was reported behind it")
	}
	for _, c := range []string{"a", "b"} {
		if route, delay := f.answer(c, policyv1.Compliant); route != answerHeld || delay != 30*time.Second {
			t.Errorf("%s, not the turn's last to succeed: %s after %s, want held for the status interval", c, answerRouteNames[route], delay)
		}
	}
	if route, _ := f.answer("c", policyv1.Compliant); route != answerNow {
		t.Errorf("c, the turn's last to succeed: %s, want a reconcile now", answerRouteNames[route])
	}
	if route, _ := f.answer("c", policyv1.Compliant); route != answerIgnored {
		t.Errorf("c's same result again: %s, want ignored", answerRouteNames[route])
	}
}

func TestAnswerGate_AFailureOrAWorseComplianceIsReconciledAfterTheBatch(t *testing.T) {
	cases := []struct {
		name    string
		cluster string
		state   policyv1.ComplianceState
		planned map[string]policyv1.ComplianceState
		want    answerRoute
	}{
		{"a cluster in its turn fails (maxFailures counts it)", "a", policyv1.NonCompliant, nil, answerBatched},
		{"a waiting cluster's first NonCompliant makes the root NonCompliant", "d", policyv1.NonCompliant, nil, answerBatched},
		{"a waiting cluster's NonCompliant, the root NonCompliant already", "d", policyv1.NonCompliant,
			map[string]policyv1.ComplianceState{"e": policyv1.NonCompliant}, answerHeld},
		{"a cluster in its turn goes Pending: it stays in its turn, the root goes Pending", "a", policyv1.Pending, nil, answerBatched},
		{"the last NonCompliant cluster recovers: the root's compliance improves", "d", policyv1.Compliant,
			map[string]policyv1.ComplianceState{"d": policyv1.NonCompliant, "e": policyv1.Pending}, answerBatched},
		{"one of two NonCompliant clusters recovers", "d", policyv1.Compliant,
			map[string]policyv1.ComplianceState{"d": policyv1.NonCompliant, "e": policyv1.NonCompliant}, answerHeld},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newGateFixture(clusterv1alpha1.ProgressivePerGroup, policyv1.Enforce).plannedWith(tc.planned).record(30 * time.Second)
			if route, _ := f.answer(tc.cluster, tc.state); route != tc.want {
				t.Errorf("%s: %s, want %s", tc.cluster, answerRouteNames[route], answerRouteNames[tc.want])
			}
		})
	}
}

// An answer on a spec the cluster's turn has not reached yet (the inform replica the hub is about
// to replace) is not the turn's success.
func TestAnswerGate_AnAnswerToAnotherSpecIsNotTheTurnsSuccess(t *testing.T) {
	f := newGateFixture(clusterv1alpha1.ProgressivePerGroup, policyv1.Enforce).record(30 * time.Second)
	f.cache["c"].specHash = informHash
	for _, c := range []string{"a", "b", "c"} {
		if route, _ := f.answer(c, policyv1.Compliant); route == answerNow {
			t.Fatalf("%s's answer reconciled now: c answered on the inform spec, its turn has not succeeded", c)
		}
	}
}

// Progressive (maxConcurrency) starts a cluster with each success: each reconciles after the
// batch. A root that only informs takes any result as a success.
func TestAnswerGate_UnderProgressiveEverySuccessCounts(t *testing.T) {
	f := newGateFixture(clusterv1alpha1.Progressive, policyv1.Enforce).record(30 * time.Second)
	if route, _ := f.answer("a", policyv1.Compliant); route != answerBatched {
		t.Errorf("Progressive, a success: %s, want batched", answerRouteNames[route])
	}
	f = newGateFixture(clusterv1alpha1.All, policyv1.Inform).
		plannedWith(map[string]policyv1.ComplianceState{"d": policyv1.NonCompliant}).record(30 * time.Second)
	f.answer("a", policyv1.NonCompliant)
	f.answer("b", policyv1.NonCompliant)
	if route, _ := f.answer("c", policyv1.NonCompliant); route != answerNow {
		t.Errorf("an inform root's last result in its turn: %s, want now", answerRouteNames[route])
	}
}

// A rollout that does not progress holds nothing back in its status, so neither does the route;
// a root this process never planned is reconciled after the batch as before.
func TestAnswerGate_WithoutARolloutInProgressOrARecordAnswersAreBatched(t *testing.T) {
	f := newGateFixture(clusterv1alpha1.ProgressivePerGroup, policyv1.Enforce).record(0)
	if route, delay := f.answer("a", policyv1.Compliant); route != answerBatched || delay != replicaEventBatch {
		t.Errorf("no hold: %s after %s, want batched after %s", answerRouteNames[route], delay, replicaEventBatch)
	}
	f = newGateFixture(clusterv1alpha1.ProgressivePerGroup, policyv1.Enforce)
	if route, _ := f.answer("a", policyv1.Compliant); route != answerBatched {
		t.Errorf("no record: %s, want batched", answerRouteNames[route])
	}
	f.record(time.Minute)
	f.gate.forget(f.key)
	if route, _ := f.answer("b", policyv1.Compliant); route != answerBatched {
		t.Errorf("record forgotten: %s, want batched", answerRouteNames[route])
	}
}

// record reads the cache as it is when it records: answers the reconcile's read missed are not
// waited for again, and a plan they made stale is reported behind.
func TestAnswerGate_ARecordBehindTheCacheSaysSo(t *testing.T) {
	cases := []struct {
		name    string
		cached  map[string]policyv1.ComplianceState
		planned map[string]policyv1.ComplianceState
		behind  bool
	}{
		{"nothing answered since the read", nil, nil, false},
		{"a cluster in its turn answered Pending: it stays in its turn", map[string]policyv1.ComplianceState{"a": policyv1.Pending},
			map[string]policyv1.ComplianceState{"a": policyv1.Pending}, false},
		{"one of the turn succeeded since", map[string]policyv1.ComplianceState{"a": policyv1.Compliant}, nil, false},
		{"the whole turn succeeded since", map[string]policyv1.ComplianceState{
			"a": policyv1.Compliant, "b": policyv1.Compliant, "c": policyv1.Compliant}, nil, true},
		{"a cluster in its turn failed since", map[string]policyv1.ComplianceState{"b": policyv1.NonCompliant}, nil, true},
		{"the root's compliance moved since", map[string]policyv1.ComplianceState{"d": policyv1.NonCompliant}, nil, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newGateFixture(clusterv1alpha1.ProgressivePerGroup, policyv1.Enforce).plannedWith(tc.planned)
			for cluster, state := range tc.cached {
				f.cache[cluster] = f.answered(cluster, state)
			}
			if f.record(30 * time.Second); f.behind != tc.behind {
				t.Errorf("behind = %v, want %v", f.behind, tc.behind)
			}
		})
	}
	// The answer counted at the record is not counted again when its event comes.
	f := newGateFixture(clusterv1alpha1.ProgressivePerGroup, policyv1.Enforce)
	before := f.cache["a"]
	f.cache["a"] = f.answered("a", policyv1.Compliant)
	f.record(30 * time.Second)
	if route, _ := f.gate.route(f.key, before, f.cache["a"]); route == answerNow {
		t.Error("a's late event completed the turn: b and c have not answered")
	}
	f.answer("b", policyv1.Compliant)
	if route, _ := f.answer("c", policyv1.Compliant); route != answerNow {
		t.Errorf("c, the last of the turn: %s, want now", answerRouteNames[route])
	}
}

func TestAnswerOnly_ASpecLabelsOrConditionsChangeIsNoAnswer(t *testing.T) {
	base := &CachedReplica{name: "team.p", namespace: "a", specHash: enforceHash, generation: 2, uid: "u",
		labels: map[string]string{RootPolicyLabel: "team.p"}, remediation: policyv1.Enforce}
	answer := *base
	answer.compliance, answer.lastEvaluatedGeneration, answer.resourceVersion = policyv1.Compliant, 2, "9"
	if !answerOnly(base, &answer) {
		t.Error("a compliance report read as more than an answer")
	}
	for name, change := range map[string]func(c *CachedReplica){
		"spec":           func(c *CachedReplica) { c.specHash, c.generation = informHash, 3 },
		"labels":         func(c *CachedReplica) { c.labels = map[string]string{RootPolicyLabel: "team.q"} },
		"rollout status": func(c *CachedReplica) { c.rolloutStatus = policyv1.RolloutTimeOut },
		"conditions": func(c *CachedReplica) {
			c.rare = &rareReplicaFields{conditions: []metav1.Condition{{Type: policyv1.RolloutConditionType}}}
		},
		"deletion": func(c *CachedReplica) { c.SetDeletionTimestamp(&metav1.Time{Time: time.Unix(1, 0)}) },
	} {
		changed := answer
		change(&changed)
		if answerOnly(base, &changed) {
			t.Errorf("a change of its %s read as an answer", name)
		}
	}
}
