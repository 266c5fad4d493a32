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
	// Previous are the policy's current conditions, to keep transition times of unchanged ones.
	Previous []kubewardenv1.PolicyCondition
	// Extra conditions the reconciler adds (a failed rollback), kept after the lifecycle's own.
	Extra []kubewardenv1.PolicyCondition
	// Blocked, when set, says an object the policy needs belongs to another policy: the serving
	// generation stays, nothing is collected, and the policy is Failed with this condition.
	Blocked *kubewardenv1.PolicyCondition
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
	conds := newestConditions(o, newest)
	extra := o.Extra
	if o.Blocked != nil {
		extra = append(slices.Clone(extra), *o.Blocked)
	}
	d.Status = kubewardenv1.PolicyStatus{
		Phase:             phase(o.Generation, d.Serving, conds),
		ServingGeneration: d.Serving,
		Conditions:        keepTransitionTimes(append(conds, extra...), o.Previous, o.Now),
	}
	if o.Blocked != nil {
		d.Status.Phase = kubewardenv1.PhaseFailed
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
	for _, c := range r.Conditions {
		if c.Type == kubewardenv1.ConditionReady && c.Replica != nil && c.Status == metav1.ConditionTrue &&
			(c.PolicyGeneration == 0 || c.PolicyGeneration == r.Generation) {
			ready[*c.Replica] = true
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
// the leader, and Ready for each live replica — Unknown for a live replica that has not reported,
// nothing for a replica that is gone.
func newestConditions(o observed, newest *revisionState) []kubewardenv1.PolicyCondition {
	if newest == nil {
		return []kubewardenv1.PolicyCondition{{
			Type: kubewardenv1.ConditionScheduled, Status: metav1.ConditionFalse, Reason: "RevisionMissing",
			Message:          fmt.Sprintf("no PolicyRevision holds generation %d yet", o.Generation),
			PolicyGeneration: o.Generation,
		}}
	}
	conds := []kubewardenv1.PolicyCondition{{
		Type: kubewardenv1.ConditionScheduled, Status: metav1.ConditionTrue, Reason: "RevisionCreated",
		Message:          fmt.Sprintf("PolicyRevision %s holds generation %d", newest.Name, newest.Generation),
		PolicyGeneration: newest.Generation,
	}}
	initialized := kubewardenv1.PolicyCondition{
		Type: kubewardenv1.ConditionInitialized, Status: metav1.ConditionUnknown, Reason: "Pending",
		Message: "waiting for the policy server's leader to pull, precompile, validate and sign the module",
	}
	ready := map[int32]kubewardenv1.PolicyCondition{}
	for _, c := range newest.Conditions {
		switch {
		case c.Type == kubewardenv1.ConditionInitialized && c.Replica == nil:
			initialized = c
		case c.Type == kubewardenv1.ConditionReady && c.Replica != nil && o.Live[*c.Replica] &&
			(c.PolicyGeneration == 0 || c.PolicyGeneration == newest.Generation):
			ready[*c.Replica] = c
		}
	}
	initialized.PolicyGeneration = newest.Generation
	conds = append(conds, initialized)
	if len(o.Live) == 0 {
		// Without this a policy would sit in Pending with nothing saying why.
		return append(conds, kubewardenv1.PolicyCondition{
			Type: kubewardenv1.ConditionReady, Status: metav1.ConditionUnknown, Reason: "NoLiveReplicas",
			Message:          "no policy-server replica holds a current Lease: is the PolicyServer running?",
			PolicyGeneration: newest.Generation,
		})
	}
	replicas := make([]int32, 0, len(o.Live))
	for n := range o.Live {
		replicas = append(replicas, n)
	}
	slices.Sort(replicas)
	for _, n := range replicas {
		c, ok := ready[n]
		if !ok {
			c = kubewardenv1.PolicyCondition{
				Type: kubewardenv1.ConditionReady, Status: metav1.ConditionUnknown, Reason: "Loading",
				Message: fmt.Sprintf("replica %d has not loaded generation %d yet", n, newest.Generation),
			}
		}
		c.Replica = ptrTo(n)
		c.PolicyGeneration = newest.Generation
		conds = append(conds, c)
	}
	return conds
}

// phase: Failed when the newest generation cannot be served (the previous one keeps serving),
// Active when it is served, Pending otherwise.
func phase(generation, serving int64, conds []kubewardenv1.PolicyCondition) kubewardenv1.PolicyPhase {
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

// keepTransitionTimes gives each condition the transition time of the previous condition with
// the same type and replica when its status did not change, and now otherwise, so an unchanged
// state writes nothing.
func keepTransitionTimes(conds, previous []kubewardenv1.PolicyCondition, now time.Time) []kubewardenv1.PolicyCondition {
	for i := range conds {
		c := &conds[i]
		if prev := findCondition(previous, c.Type, c.Replica); prev != nil && prev.Status == c.Status {
			c.LastTransitionTime = prev.LastTransitionTime
		} else if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = metav1.NewTime(now.Truncate(time.Second))
		}
	}
	return conds
}

func findCondition(conds []kubewardenv1.PolicyCondition, typ string, replica *int32) *kubewardenv1.PolicyCondition {
	for i := range conds {
		c := &conds[i]
		if c.Type == typ && ((c.Replica == nil && replica == nil) || (c.Replica != nil && replica != nil && *c.Replica == *replica)) {
			return c
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
