package rollout

import (
	"fmt"
	"hash/maphash"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	sdkv1alpha1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1alpha1"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/placement/decisions"
)

// Input is everything one rollout decision needs.
type Input struct {
	Mode     Mode
	Strategy clusterv1alpha1.RolloutStrategy
	// Groups are the decision groups of the root's placements, merged; their clusters are the
	// selected clusters.
	Groups sdkv1beta1.ClusterGroupsMap
	// Selected are the clusters of Groups, when the caller has them already; built from Groups
	// when nil.
	Selected sets.Set[string]
	// Clusters holds what is known of the selected clusters; a selected cluster missing here is
	// new to the rollout.
	Clusters map[string]Cluster
	// Root names the root the decision is for. When set, Plan answers an input it answered before
	// without asking the handler again, if that answer changed nothing (see settled); "" always asks.
	Root string
}

// selected are the clusters of the input's groups.
func (in Input) selected() sets.Set[string] {
	if in.Selected != nil {
		return in.Selected
	}
	return ClustersOf(in.Groups)
}

// Decision is the outcome for one root.
type Decision struct {
	// Clusters is the new state of every selected cluster (Active and Reported copied through); it
	// may be Input.Clusters itself (a settled root answered again), so neither is written to after.
	Clusters map[string]Cluster
	// Started lists the clusters whose turn to enforce came in this decision, sorted.
	Started []string
	// TimedOut lists the clusters that passed the progress deadline in this decision, sorted.
	TimedOut []string
	// Failing lists the clusters counted against the failure budget (Failed or TimeOut), sorted.
	Failing []string
	// BudgetSpent says the failure budget is exceeded: no further cluster is started.
	BudgetSpent bool
	// Aggregate is the root's rollout status.
	Aggregate policyv1.RolloutStatus
	// RecheckAfter is when time alone (soak, deadline) can change the decision; nil when only an
	// event can.
	RecheckAfter *time.Duration
}

// Planner decides rollouts against one clock.
type Planner struct {
	clock   clock.Clock
	settled settled
}

// NewPlanner returns a Planner reading time from c. sdk-go's handler reads the package-wide
// RolloutClock, so c is installed there: every Planner of a process must share one clock.
func NewPlanner(c clock.Clock) *Planner {
	sdkv1alpha1.RolloutClock = c
	return &Planner{clock: c, settled: settled{seed: maphash.MakeSeed()}}
}

// Plan observes each cluster, asks sdk-go's RolloutHandler whose turn it is, and returns the new
// state. Every status change stamps the cluster's LastTransitionTime, which is what soak time and
// deadline count from, also after a restart.
func (p *Planner) Plan(in Input) (Decision, error) {
	fingerprint, keyed := p.settled.fingerprint(in)
	if keyed {
		if d, ok := p.settled.lookup(in, fingerprint); ok {
			return d, nil
		}
	}
	d, err := p.plan(in)
	if err == nil && keyed {
		p.settled.record(in, fingerprint, d)
	}
	return d, err
}

func (p *Planner) plan(in Input) (Decision, error) {
	// Second precision: that is what survives a round trip through the apiserver.
	now := metav1.NewTime(p.clock.Now().Truncate(time.Second))
	out := Decision{Clusters: make(map[string]Cluster, len(in.Clusters))}
	set := func(name string, c Cluster, status policyv1.RolloutStatus) Cluster {
		if c.Status != status || c.LastTransitionTime == nil {
			c.Status, c.LastTransitionTime = status, now.DeepCopy()
		}
		out.Clusters[name] = c
		return c
	}

	selected := in.selected()
	groupOf := in.Groups.ClusterToGroupKey()
	existing := make([]sdkv1alpha1.ClusterRolloutStatus, 0, selected.Len())
	for _, name := range sortedNames(selected) {
		c := set(name, in.Clusters[name], observe(in.Mode, in.Clusters[name]))
		existing = append(existing, sdkv1alpha1.ClusterRolloutStatus{
			ClusterName:        name,
			GroupKey:           groupOf[name],
			Status:             toSDK(c.Status),
			LastTransitionTime: c.LastTransitionTime,
		})
	}

	strategy := in.Strategy
	if in.Mode != Progressive {
		strategy = asAll(strategy)
	}
	// One instant for both questions, so both are asked about the same groups.
	at := p.clock.Now()
	groups, statuses := handed(strategy, in.Groups, existing, at)
	handler, err := sdkv1alpha1.NewRolloutHandler[struct{}](decisions.Tracker(groups), nil)
	if err != nil {
		return out, fmt.Errorf("rollout handler: %w", err)
	}
	_, result, err := handler.GetRolloutCluster(strategy, statuses)
	if err != nil {
		return out, fmt.Errorf("rollout strategy %s: %w", strategy.Type, err)
	}

	for _, t := range result.ClustersTimeOut {
		set(t.ClusterName, out.Clusters[t.ClusterName], policyv1.RolloutTimeOut)
		out.TimedOut = append(out.TimedOut, t.ClusterName)
	}
	out.BudgetSpent = result.MaxFailureBreach
	soaking := false
	free := -len(displaced(in, out, result, now.Time))
	for _, r := range result.ClustersToRollout {
		if out.Clusters[r.ClusterName].Status == policyv1.RolloutToApply {
			free++
		}
	}
	for _, r := range result.ClustersToRollout {
		c := out.Clusters[r.ClusterName]
		switch c.Status {
		case policyv1.RolloutToApply:
			// A spent budget stops the rollout: the handler may still list clusters it met before
			// counting the failures, but none of them is started. A cluster new to the rollout
			// (joined the placement, nothing recorded) gets pass 1 of its own first, as the whole
			// fleet did: the new version as inform now, its turn from the next decision on.
			if !out.BudgetSpent && free > 0 && !newToRollout(in, r.ClusterName) {
				set(r.ClusterName, c, policyv1.RolloutProgressing)
				out.Started = append(out.Started, r.ClusterName)
				free--
			}
		case policyv1.RolloutSucceeded:
			soaking = true
		}
	}
	out.RecheckAfter = result.RecheckAfter
	if len(out.Started) > 0 {
		// The handler timed the clusters it saw as ToApply from nothing; asked again about them
		// as Progressing it says when their deadline falls.
		again := make([]sdkv1alpha1.ClusterRolloutStatus, 0, len(existing))
		for _, e := range existing {
			c := out.Clusters[e.ClusterName]
			e.Status, e.LastTransitionTime, e.RecheckTime = toSDK(c.Status), c.LastTransitionTime, nil
			again = append(again, e)
		}
		// The started clusters are in groups still under way: the groups handed stay the same.
		_, again = handed(strategy, in.Groups, again, at)
		if _, result, err = handler.GetRolloutCluster(strategy, again); err != nil {
			return out, fmt.Errorf("rollout strategy %s: %w", strategy.Type, err)
		}
		out.RecheckAfter = result.RecheckAfter
	}

	if wait, ok := soakEnds(in, out, now.Time); ok && (out.RecheckAfter == nil || wait < *out.RecheckAfter) {
		out.RecheckAfter = &wait
	}
	for name, c := range out.Clusters {
		if c.Status == policyv1.RolloutFailed || c.Status == policyv1.RolloutTimeOut {
			out.Failing = append(out.Failing, name)
		}
	}
	sort.Strings(out.Started)
	sort.Strings(out.TimedOut)
	sort.Strings(out.Failing)
	out.Aggregate = aggregate(out, soaking)
	return out, nil
}

// FirstPass is the first decision of a progressive rollout (a new enforce root, or a changed
// spec): every selected cluster gets the new version as inform and waits, ToApply, for its turn.
// Turns are handed out by Plan from the next decision on, once the root has recorded this one, so
// every cluster carries the new version before any enforces it. The strategy is checked here
// already, so a bad one is reported before anything is written.
func (p *Planner) FirstPass(in Input) (Decision, error) {
	now := metav1.NewTime(p.clock.Now().Truncate(time.Second))
	selected := in.selected()
	groupOf := in.Groups.ClusterToGroupKey()
	out := Decision{Clusters: make(map[string]Cluster, selected.Len())}
	existing := make([]sdkv1alpha1.ClusterRolloutStatus, 0, selected.Len())
	for _, name := range sortedNames(selected) {
		c := in.Clusters[name]
		c.Status, c.LastTransitionTime = policyv1.RolloutToApply, now.DeepCopy()
		out.Clusters[name] = c
		existing = append(existing, sdkv1alpha1.ClusterRolloutStatus{ClusterName: name, GroupKey: groupOf[name],
			Status: sdkv1alpha1.ToApply, LastTransitionTime: c.LastTransitionTime})
	}
	groups, statuses := handed(in.Strategy, in.Groups, existing, p.clock.Now())
	handler, err := sdkv1alpha1.NewRolloutHandler[struct{}](decisions.Tracker(groups), nil)
	if err != nil {
		return out, fmt.Errorf("rollout handler: %w", err)
	}
	if _, _, err := handler.GetRolloutCluster(in.Strategy, statuses); err != nil {
		return out, fmt.Errorf("rollout strategy %s: %w", in.Strategy.Type, err)
	}
	out.Aggregate = aggregate(out, false)
	return out, nil
}

// aggregate is the root's rollout status: Progressing (ToApply included) while any cluster still
// has to apply, report or soak, Failed when the budget is spent or the rollout ended with failures,
// Succeeded otherwise. TimeOut is not an aggregate value; it counts as a failure.
func aggregate(d Decision, soaking bool) policyv1.RolloutStatus {
	if len(d.Clusters) == 0 {
		return ""
	}
	if d.BudgetSpent {
		return policyv1.RolloutFailed
	}
	if soaking {
		return policyv1.RolloutProgressing
	}
	for _, c := range d.Clusters {
		if c.Status == policyv1.RolloutToApply || c.Status == policyv1.RolloutProgressing {
			return policyv1.RolloutProgressing
		}
	}
	if len(d.Failing) > 0 {
		return policyv1.RolloutFailed
	}
	return policyv1.RolloutSucceeded
}

// asAll keeps the progress deadline of whatever strategy was asked for: a root that is not rolled
// out progressively is still timed out when its clusters do not answer.
func asAll(s clusterv1alpha1.RolloutStrategy) clusterv1alpha1.RolloutStrategy {
	all := clusterv1alpha1.RolloutStrategy{Type: clusterv1alpha1.All, All: &clusterv1alpha1.RolloutAll{}}
	switch {
	case s.All != nil:
		all.All = s.All.DeepCopy()
	case s.Progressive != nil:
		all.All.ProgressDeadline = s.Progressive.ProgressDeadline
	case s.ProgressivePerGroup != nil:
		all.All.ProgressDeadline = s.ProgressivePerGroup.ProgressDeadline
	}
	return all
}

func sortedNames(s interface{ UnsortedList() []string }) []string {
	names := s.UnsortedList()
	sort.Strings(names)
	return names
}

// newToRollout says whether a progressive rollout has no record of the cluster: it has not been
// handed the current version as inform yet, so it cannot be given its turn to enforce.
func newToRollout(in Input, name string) bool {
	c := in.Clusters[name]
	return in.Mode == Progressive && c.Status == "" && !c.Active
}

// handed is what the handler is given of a root's groups and statuses. Per group, sdk-go reads a
// ToApply status as it reads none (it recomputes both from the groups), and passes over a group
// whose every cluster succeeded longer ago than the soak time without a trace: no cluster to roll
// out, no failure, no recheck. Yet it searches the selected clusters for each status it is given,
// one by one (getRemovedClusters): 4.5 million string compares per question at 3,000 clusters,
// asked once or twice per turn of a group. So it is given the clusters of the groups still under
// way only, and their statuses but ToApply. The other strategies order and count every status
// they are given: they get all.
func handed(strategy clusterv1alpha1.RolloutStrategy, groups sdkv1beta1.ClusterGroupsMap, statuses []sdkv1alpha1.ClusterRolloutStatus, now time.Time) (sdkv1beta1.ClusterGroupsMap, []sdkv1alpha1.ClusterRolloutStatus) {
	if strategy.Type != clusterv1alpha1.ProgressivePerGroup {
		return groups, statuses
	}
	var soak time.Duration
	if strategy.ProgressivePerGroup != nil {
		soak = strategy.ProgressivePerGroup.MinSuccessTime.Duration
	}
	unfinished := map[sdkv1beta1.GroupKey]int{}
	for key, clusters := range groups {
		unfinished[key] = clusters.Len()
	}
	for _, s := range statuses {
		if s.Status == sdkv1alpha1.Succeeded && (s.LastTransitionTime == nil && soak <= 0 ||
			s.LastTransitionTime != nil && !now.Before(s.LastTransitionTime.Add(soak))) {
			unfinished[s.GroupKey]--
		}
	}
	// A finished group stays, empty: sdk-go's tracker counts group indexes from 0 to the number
	// of groups, so a group left out would hide the last one.
	under := make(sdkv1beta1.ClusterGroupsMap, len(groups))
	for key, clusters := range groups {
		under[key] = clusters
		if unfinished[key] <= 0 {
			under[key] = sets.Set[string]{}
		}
	}
	out := make([]sdkv1alpha1.ClusterRolloutStatus, 0, len(statuses))
	for _, s := range statuses {
		if unfinished[s.GroupKey] > 0 && s.Status != sdkv1alpha1.ToApply {
			out = append(out, s)
		}
	}
	if strategy.ProgressivePerGroup == nil || len(strategy.ProgressivePerGroup.MandatoryDecisionGroups.MandatoryDecisionGroups) == 0 {
		emptyUnreached(under, out, canTimeOut(strategy, now))
	}
	return under, out
}

// deadlineMargin is how much later than the instant handed was asked about the handler may read
// its clock: a Progressing cluster whose deadline falls within it is taken as timed out.
const deadlineMargin = time.Minute

// canTimeOut says whether the handler, asked about strategy at about now, may time a Progressing
// cluster out: its progress deadline passed or is near, or cannot be read (the handler then
// answers with an error, whatever it is handed).
func canTimeOut(strategy clusterv1alpha1.RolloutStrategy, now time.Time) func(sdkv1alpha1.ClusterRolloutStatus) bool {
	deadline := ""
	if strategy.ProgressivePerGroup != nil {
		deadline = strategy.ProgressivePerGroup.ProgressDeadline
	}
	if deadline == "" || deadline == "None" {
		return func(sdkv1alpha1.ClusterRolloutStatus) bool { return false }
	}
	d, err := time.ParseDuration(deadline)
	return func(s sdkv1alpha1.ClusterRolloutStatus) bool {
		return err != nil || s.LastTransitionTime == nil || !now.Add(deadlineMargin).Before(s.LastTransitionTime.Add(d))
	}
}

// emptyUnreached empties the untouched groups sdk-go would not reach. It goes through the groups
// by index and stops at the first with a cluster to roll out; with no failure to count, that is at
// the latest the first group holding a cluster without a status. A group of a higher index that
// holds no cluster with a status is never read, and handed empty it is not searched either: in
// the first turns of a 30-group rollout, 29 groups of 30. With a failure counted, sdk-go may go
// on past a group with clusters to roll out (its TimeOut clusters count against the group
// without being rolled out), so then every group stays; so it does when a Progressing cluster
// may be timed out by the handler (timesOut).
func emptyUnreached(groups sdkv1beta1.ClusterGroupsMap, statuses []sdkv1alpha1.ClusterRolloutStatus, timesOut func(sdkv1alpha1.ClusterRolloutStatus) bool) {
	named := make(sets.Set[string], len(statuses))
	for _, s := range statuses {
		if s.Status == sdkv1alpha1.Failed || s.Status == sdkv1alpha1.TimeOut || s.Status == sdkv1alpha1.Progressing && timesOut(s) {
			return
		}
		named.Insert(s.ClusterName)
	}
	first, found := int32(0), false
	for key, clusters := range groups {
		if found && key.GroupIndex >= first {
			continue
		}
		for name := range clusters {
			if !named.Has(name) {
				first, found = key.GroupIndex, true
				break
			}
		}
	}
	if !found {
		return
	}
	untouched := func(clusters sets.Set[string]) bool {
		for name := range clusters {
			if named.Has(name) {
				return false
			}
		}
		return true
	}
	for key, clusters := range groups {
		if key.GroupIndex > first && clusters.Len() > 0 && untouched(clusters) {
			groups[key] = sets.Set[string]{}
		}
	}
}
