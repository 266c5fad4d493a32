package admissionpolicy

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// revisionState is what the decision needs of one PolicyRevision.
type revisionState struct {
	Name       string
	Generation int64
	Enabled    bool
	// Mode is the mode in the revision's data: what the policy does while this generation serves.
	Mode       kubewardenv1.PolicyMode
	Conditions []kubewardenv1.PolicyCondition
	Replicas   []kubewardenv1.ReplicaStatus
}

// observed is everything the controller read about one policy.
type observed struct {
	// Generation is the policy's metadata.generation: the newest generation.
	Generation int64
	// Serving is the generation the webhook points at now (status.servingGeneration), 0 for none.
	Serving   int64
	Revisions []revisionState
	// Live are the replicas whose Lease is current.
	Live map[int32]bool
	// Kept is the PolicyServer's keptRevisions.
	Kept int
	// PolicyServerMissing: the PolicyServer the policy names does not exist or is being deleted
	// (Kubewarden's "scheduled").
	PolicyServerMissing bool
	// LeaderUnavailable, when set, says why the PolicyServer's leader workload is not available
	// (its LeaderReady condition): a generation not yet prepared waits for it.
	LeaderUnavailable string
	// Previous is the policy's current status, to keep transition times of unchanged entries.
	Previous kubewardenv1.PolicyStatus
	// Extra conditions the reconciler adds (a failed rollback), kept after the lifecycle's own.
	Extra []metav1.Condition
	// Blocked, when set, says an object the policy needs belongs to another policy: the serving
	// generation stays, nothing is collected, and the policy is Failed with this condition.
	Blocked *metav1.Condition
	Now     time.Time
}

// decision is what the controller writes for one policy.
type decision struct {
	// Serving is the generation the webhook configuration must point at; 0 means no generation
	// has been Ready everywhere yet, so there is no webhook configuration.
	Serving int64
	Status  kubewardenv1.PolicyStatus
	// Collect are the revisions beyond the kept count, to disable and delete once the webhook
	// configuration points at Serving.
	Collect []string
}

// decide moves the serving generation forward to the newest generation every live replica is
// Ready for — never backward, so a replica that restarts and reloads does not flip the webhook —
// and reports the newest generation's progress as the policy's status.
func decide(o observed) decision {
	revs := slices.Clone(o.Revisions)
	sort.Slice(revs, func(i, j int) bool { return revs[i].Generation > revs[j].Generation })

	d := decision{Serving: o.Serving}
	for _, r := range revs {
		if o.Blocked != nil {
			break
		}
		if r.Generation <= o.Serving {
			break
		}
		if r.Enabled && readyEverywhere(r, o.Live) {
			d.Serving = r.Generation
			break
		}
	}

	newest := findRevision(revs, o.Generation)
	conds, replicas := newestConditions(o, newest)
	ph := phase(o.Generation, d.Serving, conds)
	if o.Blocked != nil {
		ph = kubewardenv1.PhaseFailed
	}
	conds = append(conds, policyActive(o, d.Serving, ph))
	conds = append(conds, o.Extra...)
	if o.Blocked != nil {
		conds = append(conds, *o.Blocked)
	}
	d.Status = kubewardenv1.PolicyStatus{
		PolicyStatus:      policyStatus(o, d.Serving),
		Phase:             ph,
		ServingGeneration: d.Serving,
		Conditions:        keepTransitionTimes(conds, o.Previous.Conditions, o.Now),
		Replicas:          keepReplicaTransitionTimes(replicas, o.Previous.Replicas, o.Now),
	}
	if serving := findRevision(revs, d.Serving); serving != nil {
		d.Status.Mode = serving.Mode
	}
	if d.Serving > 0 && o.Blocked == nil {
		d.Collect = collect(revs, o.Kept, d.Serving)
	}
	return d
}

// readyEverywhere: at least one replica is live and every live one reports Ready for r. Replicas
// that are not live neither count nor block: their Lease says they are gone.
func readyEverywhere(r revisionState, live map[int32]bool) bool {
	if len(live) == 0 {
		return false
	}
	ready := map[int32]bool{}
	for _, rs := range r.Replicas {
		if rs.Ready == metav1.ConditionTrue && (rs.PolicyGeneration == 0 || rs.PolicyGeneration == r.Generation) {
			ready[rs.Replica] = true
		}
	}
	for n := range live {
		if !ready[n] {
			return false
		}
	}
	return true
}

// newestConditions are the policy's view of the newest generation: Scheduled, Initialized from
// the leader and Ready summing up the replicas, with each live replica's report — Unknown for a
// live replica that has not reported, nothing for a replica that is gone.
func newestConditions(o observed, newest *revisionState) ([]metav1.Condition, []kubewardenv1.ReplicaStatus) {
	if newest == nil {
		return []metav1.Condition{{
			Type: kubewardenv1.ConditionScheduled, Status: metav1.ConditionFalse, Reason: "RevisionMissing",
			Message:            fmt.Sprintf("no PolicyRevision holds generation %d yet", o.Generation),
			ObservedGeneration: o.Generation,
		}}, nil
	}
	gen := newest.Generation
	conds := []metav1.Condition{{
		Type: kubewardenv1.ConditionScheduled, Status: metav1.ConditionTrue, Reason: "RevisionCreated",
		Message:            fmt.Sprintf("PolicyRevision %s holds generation %d", newest.Name, gen),
		ObservedGeneration: gen,
	}}
	initialized := metav1.Condition{
		Type: kubewardenv1.ConditionInitialized, Status: metav1.ConditionUnknown, Reason: "Pending",
		Message: "waiting for the policy server's leader to pull, precompile, validate and sign the module",
	}
	if o.LeaderUnavailable != "" {
		initialized.Reason = "LeaderUnavailable"
		initialized.Message = "waiting for the policy server's leader to pull, precompile, validate and sign the module: " + o.LeaderUnavailable
	}
	for _, c := range newest.Conditions {
		if c.Type == kubewardenv1.ConditionInitialized {
			initialized.Status, initialized.Reason, initialized.Message = c.Status, reasonOr(c.Reason), c.Message
		}
	}
	initialized.ObservedGeneration = gen
	conds = append(conds, initialized)
	if len(o.Live) == 0 {
		// Without this a policy would sit in Pending with nothing saying why.
		return append(conds, metav1.Condition{
			Type: kubewardenv1.ConditionReady, Status: metav1.ConditionUnknown, Reason: "NoLiveReplicas",
			Message:            "no policy-server replica holds a current Lease: is the PolicyServer running?",
			ObservedGeneration: gen,
		}), nil
	}
	reported := map[int32]kubewardenv1.ReplicaStatus{}
	for _, rs := range newest.Replicas {
		if o.Live[rs.Replica] && (rs.PolicyGeneration == 0 || rs.PolicyGeneration == gen) {
			reported[rs.Replica] = rs
		}
	}
	live := make([]int32, 0, len(o.Live))
	for n := range o.Live {
		live = append(live, n)
	}
	slices.Sort(live)
	replicas := make([]kubewardenv1.ReplicaStatus, 0, len(live))
	for _, n := range live {
		rs, ok := reported[n]
		if !ok {
			rs = kubewardenv1.ReplicaStatus{
				Ready: metav1.ConditionUnknown, Reason: "Loading",
				Message: fmt.Sprintf("replica %d has not loaded generation %d yet", n, gen),
			}
		}
		rs.Replica, rs.PolicyGeneration = n, gen
		replicas = append(replicas, rs)
	}
	return append(conds, readySummary(replicas, gen)), replicas
}

// readySummary is Ready for the policy: True when every live replica serves the generation,
// False when one cannot load it (naming the first such replica), Unknown while some have not
// said. So `kubectl wait --for=condition=Ready` waits for every live replica.
func readySummary(replicas []kubewardenv1.ReplicaStatus, gen int64) metav1.Condition {
	c := metav1.Condition{Type: kubewardenv1.ConditionReady, ObservedGeneration: gen}
	var waiting []string
	for _, rs := range replicas {
		switch rs.Ready {
		case metav1.ConditionFalse:
			c.Status, c.Reason = metav1.ConditionFalse, reasonOr(rs.Reason)
			c.Message = fmt.Sprintf("replica %d cannot load generation %d: %s", rs.Replica, gen, rs.Message)
			return c
		case metav1.ConditionUnknown:
			waiting = append(waiting, fmt.Sprint(rs.Replica))
		}
	}
	if len(waiting) > 0 {
		c.Status, c.Reason = metav1.ConditionUnknown, "Loading"
		c.Message = fmt.Sprintf("replicas %s have not loaded generation %d yet", strings.Join(waiting, ", "), gen)
		return c
	}
	all := make([]string, len(replicas))
	for i, rs := range replicas {
		all[i] = fmt.Sprint(rs.Replica)
	}
	c.Status, c.Reason = metav1.ConditionTrue, "Loaded"
	c.Message = fmt.Sprintf("every live replica (%s) serves generation %d", strings.Join(all, ", "), gen)
	return c
}

// policyActive is Kubewarden's PolicyActive: True once the webhook configuration calls the
// newest generation. Its observedGeneration is the policy's generation, so `kubectl wait
// --for=condition=PolicyActive` after an update waits for the new generation, not the old one.
func policyActive(o observed, serving int64, ph kubewardenv1.PolicyPhase) metav1.Condition {
	c := metav1.Condition{Type: kubewardenv1.ConditionPolicyActive, ObservedGeneration: o.Generation}
	previous := "no webhook configuration calls the policy yet"
	if serving > 0 {
		previous = fmt.Sprintf("the webhook configuration calls generation %d", serving)
	}
	switch {
	case serving == o.Generation:
		c.Status, c.Reason = metav1.ConditionTrue, "PolicyActive"
		c.Message = fmt.Sprintf("the webhook configuration calls generation %d on every replica", serving)
	case ph == kubewardenv1.PhaseFailed:
		c.Status, c.Reason = metav1.ConditionFalse, "GenerationFailed"
		c.Message = fmt.Sprintf("generation %d cannot be served; %s", o.Generation, previous)
	default:
		c.Status, c.Reason = metav1.ConditionFalse, "GenerationPending"
		c.Message = fmt.Sprintf("generation %d is not served by every replica yet; %s", o.Generation, previous)
	}
	return c
}

// policyStatus is Kubewarden's status.policyStatus. It stays active while a newer generation
// rolls out, as Kubewarden's does: an older generation keeps answering, and the audit scanner
// keeps scanning with it.
func policyStatus(o observed, serving int64) kubewardenv1.PolicyStatusEnum {
	switch {
	case o.PolicyServerMissing:
		return kubewardenv1.PolicyStatusScheduled
	case serving > 0:
		return kubewardenv1.PolicyStatusActive
	default:
		return kubewardenv1.PolicyStatusPending
	}
}

// reasonOr gives a condition the reason metav1.Condition requires when the reporter left none.
func reasonOr(reason string) string {
	if reason == "" {
		return "Unknown"
	}
	return reason
}

// phase: Failed when the newest generation cannot be served (the previous one keeps serving),
// Active when it is served, Pending otherwise.
func phase(generation, serving int64, conds []metav1.Condition) kubewardenv1.PolicyPhase {
	for _, c := range conds {
		if (c.Type == kubewardenv1.ConditionInitialized || c.Type == kubewardenv1.ConditionReady) && c.Status == metav1.ConditionFalse {
			return kubewardenv1.PhaseFailed
		}
	}
	if serving == generation {
		return kubewardenv1.PhaseActive
	}
	return kubewardenv1.PhasePending
}

// collect names the revisions beyond the newest kept ones, never the serving one: the apiserver
// may still be calling it.
func collect(newestFirst []revisionState, kept int, serving int64) []string {
	if kept < 1 {
		kept = defaultKeptRevisions
	}
	var out []string
	for i, r := range newestFirst {
		if i >= kept && r.Generation != serving {
			out = append(out, r.Name)
		}
	}
	return out
}

func findRevision(revs []revisionState, generation int64) *revisionState {
	for i := range revs {
		if revs[i].Generation == generation {
			return &revs[i]
		}
	}
	return nil
}

// keepTransitionTimes gives each condition the transition time of the previous condition of its
// type when its status did not change, and now otherwise, so an unchanged state writes nothing.
func keepTransitionTimes(conds, previous []metav1.Condition, now time.Time) []metav1.Condition {
	for i := range conds {
		c := &conds[i]
		if prev := findCondition(previous, c.Type); prev != nil && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		} else if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		}
	}
	return conds
}

// keepReplicaTransitionTimes does the same for the replicas' reports.
func keepReplicaTransitionTimes(replicas, previous []kubewardenv1.ReplicaStatus, now time.Time) []kubewardenv1.ReplicaStatus {
	for i := range replicas {
		rs := &replicas[i]
		if prev := findReplica(previous, rs.Replica); prev != nil && prev.Ready == rs.Ready {
			rs.LastTransitionTime = prev.LastTransitionTime
		} else if rs.LastTransitionTime.IsZero() {
			rs.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		}
	}
	return replicas
}

func findCondition(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func findReplica(replicas []kubewardenv1.ReplicaStatus, n int32) *kubewardenv1.ReplicaStatus {
	for i := range replicas {
		if replicas[i].Replica == n {
			return &replicas[i]
		}
	}
	return nil
}

// keptGenerations lists the generations held by revisions, for messages.
func keptGenerations(revs []revisionState) string {
	gens := make([]int64, 0, len(revs))
	for _, r := range revs {
		gens = append(gens, r.Generation)
	}
	slices.Sort(gens)
	parts := make([]string, len(gens))
	for i, g := range gens {
		parts[i] = fmt.Sprint(g)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func ptrTo[T any](v T) *T { return &v }
