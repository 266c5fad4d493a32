package status

import (
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
	"regent.dev/regent/hub/rollout"
)

// rolloutCondition is the root's condition the hub's propagator keeps: its observedGeneration says
// which generation the per-cluster record is for, its reason and message where the rollout stands.
const rolloutCondition = "Rollout"

// budgetSpentReason is the Rollout condition's reason once the failure budget stopped the rollout.
const budgetSpentReason = "FailureBudgetSpent"

// Rollout is one root policy's rollout: every selected cluster by decision group, with what it
// waits for.
type Rollout struct {
	Namespace  string `json:"namespace"`
	Policy     string `json:"policy"`
	Generation int64  `json:"generation"`
	// Strategy is the rollout strategy type as the hub applies it: a root that only informs, or
	// whose strategy is All, goes to every cluster at once.
	Strategy         clusterv1alpha1.RolloutType `json:"strategy"`
	Progressive      bool                        `json:"progressive"`
	MinSuccessTime   string                      `json:"minSuccessTime,omitempty"`
	ProgressDeadline string                      `json:"progressDeadline,omitempty"`
	// Status is the root's aggregate; Current says the hub's record is for this generation (a
	// changed spec starts over and the old record no longer counts).
	Status  policyv1.RolloutStatus `json:"status,omitempty"`
	Current bool                   `json:"current"`
	Reason  string                 `json:"reason,omitempty"`
	Message string                 `json:"message,omitempty"`
	// Budget is the failure budget over all clusters (Progressive); ProgressivePerGroup keeps one
	// per group instead.
	Budget *Budget `json:"failureBudget,omitempty"`
	Groups []Group `json:"groups"`
}

// Budget is a failure budget: the rollout stops once more than Allowed clusters fail or time out.
type Budget struct {
	Used    int  `json:"used"`
	Allowed int  `json:"allowed"`
	Spent   bool `json:"spent"`
}

// Group is one decision group of the root's placements.
type Group struct {
	Index     int32          `json:"index"`
	Name      string         `json:"name,omitempty"`
	Mandatory bool           `json:"mandatory,omitempty"`
	Budget    *Budget        `json:"failureBudget,omitempty"`
	Clusters  []ClusterState `json:"clusters"`
}

// ClusterState is one cluster's line of the rollout.
type ClusterState struct {
	Name       string                   `json:"name"`
	Status     policyv1.RolloutStatus   `json:"status,omitempty"`
	Compliance policyv1.ComplianceState `json:"compliance,omitempty"`
	Since      *metav1.Time             `json:"since,omitempty"`
	Violations *int64                   `json:"violations,omitempty"`
	// SoakLeft is how long a Succeeded cluster still holds its slot (minSuccessTime).
	SoakLeft *metav1.Duration `json:"soakLeft,omitempty"`
	// DeadlineIn is how long a Progressing cluster has before it times out (progressDeadline).
	DeadlineIn *metav1.Duration `json:"deadlineIn,omitempty"`
	// Waiting says in words what the cluster waits for; empty when nothing.
	Waiting string `json:"waiting,omitempty"`
}

// Finished says the rollout of the current generation ended, and whether it succeeded.
func (r Rollout) Finished() (done, succeeded bool) {
	if !r.Current {
		return false, false
	}
	switch r.Status {
	case policyv1.RolloutSucceeded:
		return true, true
	case policyv1.RolloutFailed:
		return true, false
	}
	return false, false
}

// Counts returns how many clusters of g are in each rollout status.
func (g Group) Counts() map[policyv1.RolloutStatus]int {
	out := map[policyv1.RolloutStatus]int{}
	for _, c := range g.Clusters {
		out[c.Status]++
	}
	return out
}

// BuildRollout computes the rollout view of root from its status, its strategy and the decision
// groups of its placements, at now. Clusters in the root's status that no group holds any more
// (their placement dropped them) are listed in a last group named "removed".
func BuildRollout(root *policyv1.Policy, groups sdkv1beta1.ClusterGroupsMap, now time.Time) Rollout {
	strategy, mode := propagator.StrategyOf(root)
	progressive := mode == rollout.Progressive
	cfg := configOf(strategy)
	r := Rollout{
		Namespace: root.Namespace, Policy: root.Name, Generation: root.Generation,
		Strategy: strategy.Type, Progressive: progressive, Status: root.Status.RolloutStatus,
	}
	if progressive && cfg.MinSuccessTime.Duration > 0 {
		r.MinSuccessTime = cfg.MinSuccessTime.Duration.String()
	}
	r.ProgressDeadline = cfg.ProgressDeadline
	if c := meta.FindStatusCondition(root.Status.Conditions, rolloutCondition); c != nil {
		r.Current = c.ObservedGeneration == root.Generation
		r.Reason, r.Message = c.Reason, c.Message
	}
	lines := map[string]*policyv1.CompliancePerClusterStatus{}
	if r.Current {
		for _, l := range root.Status.Status {
			lines[l.ClusterName] = l
		}
	}
	deadline, hasDeadline := parseDeadline(cfg.ProgressDeadline)
	soak := time.Duration(0)
	if progressive {
		soak = cfg.MinSuccessTime.Duration
	}
	mandatory := mandatoryOf(strategy)
	seen := map[string]bool{}
	for _, key := range groups.GetOrderedGroupKeys() {
		g := Group{Index: key.GroupIndex, Name: key.GroupName, Mandatory: progressive && isMandatory(key, mandatory)}
		names := groups[key].UnsortedList()
		sort.Strings(names)
		for _, name := range names {
			if seen[name] {
				// The hub counts a cluster chosen by two placements once, in the first group.
				continue
			}
			seen[name] = true
			g.Clusters = append(g.Clusters, clusterState(name, lines[name], now, soak, deadline, hasDeadline))
		}
		if len(g.Clusters) > 0 {
			r.Groups = append(r.Groups, g)
		}
	}
	var removed []ClusterState
	for name, l := range lines {
		if !seen[name] {
			c := clusterState(name, l, now, 0, 0, false)
			c.Waiting = "no longer selected: the hub removes its replica"
			removed = append(removed, c)
		}
	}
	if len(removed) > 0 {
		sort.Slice(removed, func(i, j int) bool { return removed[i].Name < removed[j].Name })
		r.Groups = append(r.Groups, Group{Index: -1, Name: "removed", Clusters: removed})
	}
	applyBudgets(&r, strategy, cfg)
	if progressive {
		explainTurns(&r)
		if strategy.Type == clusterv1alpha1.Progressive && strategy.Progressive != nil {
			explainConcurrency(&r, strategy.Progressive.MaxConcurrency)
		}
	}
	return r
}

func clusterState(name string, l *policyv1.CompliancePerClusterStatus, now time.Time, soak, deadline time.Duration, hasDeadline bool) ClusterState {
	c := ClusterState{Name: name}
	if l == nil {
		c.Waiting = "not in the hub's record yet: the propagator has not reconciled it"
		return c
	}
	c.Status, c.Compliance, c.Since, c.Violations = l.RolloutStatus, l.ComplianceState, l.LastTransitionTime, l.Violations
	var since time.Time
	if l.LastTransitionTime != nil {
		since = l.LastTransitionTime.Time
	}
	switch c.Status {
	case policyv1.RolloutToApply:
		c.Waiting = "its turn to enforce"
	case policyv1.RolloutProgressing:
		c.Waiting = "compliance at the current generation"
		if hasDeadline && !since.IsZero() {
			left := since.Add(deadline).Sub(now).Truncate(time.Second)
			if left < 0 {
				left = 0
			}
			c.DeadlineIn = &metav1.Duration{Duration: left}
			c.Waiting += ", deadline in " + left.String()
		}
	case policyv1.RolloutSucceeded:
		if soak > 0 && !since.IsZero() {
			if left := since.Add(soak).Sub(now).Truncate(time.Second); left > 0 {
				c.SoakLeft = &metav1.Duration{Duration: left}
				c.Waiting = "soak time, " + left.String() + " left"
			}
		}
	case policyv1.RolloutFailed:
		c.Waiting = "NonCompliant: counts against the failure budget"
	case policyv1.RolloutTimeOut:
		c.Waiting = "passed the progress deadline: counts against the failure budget"
	}
	return c
}

// explainTurns names, for clusters waiting their turn, what holds them: a mandatory group still
// rolling out, or (per group) an earlier group not finished.
func explainTurns(r *Rollout) {
	stopped := r.Current && r.Reason == budgetSpentReason || r.Budget != nil && r.Budget.Spent
	for _, g := range r.Groups {
		stopped = stopped || g.Budget != nil && g.Budget.Spent
	}
	for i := range r.Groups {
		g := &r.Groups[i]
		for j := range g.Clusters {
			c := &g.Clusters[j]
			if c.Status != policyv1.RolloutToApply {
				continue
			}
			if blocker := firstUnfinished(r.Groups[:i], r.Strategy, g.Mandatory); blocker != nil {
				c.Waiting = "its turn: " + groupLabel(*blocker) + " is not finished"
			}
			if stopped {
				c.Waiting = "nothing: the failure budget is spent, the rollout stopped"
			}
		}
	}
}

// explainConcurrency names maxConcurrency for clusters of a Progressive rollout still waiting for
// their turn while every slot is taken by a cluster progressing or soaking (sdk-go counts the
// slots over the non-mandatory clusters; unset means all of them).
func explainConcurrency(r *Rollout, maxConcurrency intstr.IntOrString) {
	total, busy := 0, 0
	for _, g := range r.Groups {
		if g.Index < 0 || g.Mandatory {
			continue
		}
		total += len(g.Clusters)
		for _, c := range g.Clusters {
			if c.Status == policyv1.RolloutProgressing || c.SoakLeft != nil {
				busy++
			}
		}
	}
	slots := rolloutSize(maxConcurrency, total)
	if slots == 0 {
		slots = total
	}
	if busy < slots {
		return
	}
	for i := range r.Groups {
		for j := range r.Groups[i].Clusters {
			c := &r.Groups[i].Clusters[j]
			if c.Status == policyv1.RolloutToApply && c.Waiting == "its turn to enforce" {
				c.Waiting = fmt.Sprintf("its turn: all %d slots of maxConcurrency are taken", slots)
			}
		}
	}
}

// firstUnfinished is the first earlier group that still keeps later ones waiting: any group under
// ProgressivePerGroup, a mandatory group under Progressive.
func firstUnfinished(earlier []Group, strategy clusterv1alpha1.RolloutType, selfMandatory bool) *Group {
	for i := range earlier {
		g := &earlier[i]
		if strategy != clusterv1alpha1.ProgressivePerGroup && (!g.Mandatory || selfMandatory) {
			continue
		}
		for _, c := range g.Clusters {
			if c.Status == policyv1.RolloutToApply || c.Status == policyv1.RolloutProgressing || c.SoakLeft != nil {
				return g
			}
		}
	}
	return nil
}

func groupLabel(g Group) string {
	if g.Name != "" {
		return fmt.Sprintf("group %d (%s)", g.Index, g.Name)
	}
	return fmt.Sprintf("group %d", g.Index)
}

func configOf(s clusterv1alpha1.RolloutStrategy) clusterv1alpha1.RolloutConfig {
	switch {
	case s.Type == clusterv1alpha1.Progressive && s.Progressive != nil:
		return s.Progressive.RolloutConfig
	case s.Type == clusterv1alpha1.ProgressivePerGroup && s.ProgressivePerGroup != nil:
		return s.ProgressivePerGroup.RolloutConfig
	case s.All != nil:
		return s.All.RolloutConfig
	}
	return clusterv1alpha1.RolloutConfig{}
}

func mandatoryOf(s clusterv1alpha1.RolloutStrategy) []clusterv1alpha1.MandatoryDecisionGroup {
	switch {
	case s.Type == clusterv1alpha1.Progressive && s.Progressive != nil:
		return s.Progressive.MandatoryDecisionGroups.MandatoryDecisionGroups
	case s.Type == clusterv1alpha1.ProgressivePerGroup && s.ProgressivePerGroup != nil:
		return s.ProgressivePerGroup.MandatoryDecisionGroups.MandatoryDecisionGroups
	}
	return nil
}

// isMandatory matches a group as sdk-go does: by name when the entry names one, else by index.
func isMandatory(key sdkv1beta1.GroupKey, mandatory []clusterv1alpha1.MandatoryDecisionGroup) bool {
	for _, m := range mandatory {
		if m.GroupName != "" {
			if m.GroupName == key.GroupName {
				return true
			}
			continue
		}
		if m.GroupIndex == key.GroupIndex {
			return true
		}
	}
	return false
}

// parseDeadline reads progressDeadline as sdk-go does: empty or None is no deadline.
func parseDeadline(s string) (time.Duration, bool) {
	if s == "" || s == "None" {
		return 0, false
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, false
	}
	return d, true
}
