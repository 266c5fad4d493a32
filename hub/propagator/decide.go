package propagator

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/rollout"
)

// input is what the reconciler read for one root.
type input struct {
	root      *policyv1.Policy
	replicas  map[string]*CachedReplica
	selection selection
	groups    sdkv1beta1.ClusterGroupsMap
	// selected are the clusters of groups; rollout.ClustersOf(groups) when nil.
	selected sets.Set[string]
	// enforcing are the clusters of placements whose binding overrides remediation to enforce.
	enforcing sets.Set[string]
	// violations are the fail counts of the clusters' rolled-up reports, by cluster.
	violations map[string]int64
	// setMembers are the members of the PolicySets the root depends on, by set; a set that does
	// not exist is absent.
	setMembers map[types.NamespacedName][]string
}

// plan is what the reconciler writes for one root.
type plan struct {
	selection  selection
	decision   rollout.Decision
	groups     sdkv1beta1.ClusterGroupsMap
	compliance map[string]policyv1.ComplianceState
	violations map[string]int64
	desired    map[string]*policyv1.PolicySpec
	// hash is the SpecHash of each spec in desired.
	hash             map[*policyv1.PolicySpec]string
	overridesIgnored bool
	// input is what the planner decided from, for Planner.Settles.
	input rollout.Input
}

// decide turns what was read into what must be: each selected cluster's rollout status, the spec
// its replica carries, and its compliance as the root shows it.
func decide(planner *rollout.Planner, in input) (plan, error) {
	root := in.root
	strategy, mode := strategyOf(root)
	sp := specsOf(root, in.setMembers)
	out := plan{selection: in.selection, hash: sp.hash, compliance: map[string]policyv1.ComplianceState{},
		violations: in.violations}
	out.overridesIgnored = len(in.selection.Enforcing) > 0 && strategy.Type != clusterv1alpha1.All
	active := func(cluster string) *policyv1.PolicySpec {
		if mode != rollout.Progressive && !out.overridesIgnored && in.enforcing.Has(cluster) {
			return sp.enforced
		}
		return sp.active
	}

	selected := in.selected
	if selected == nil {
		selected = rollout.ClustersOf(in.groups)
	}
	// The root's record is for the rollout of the generation in its Rollout condition; any spec
	// change since starts a new rollout from pass 1. Read into the planner's input directly: a
	// map of the lines by cluster would be one more map of every cluster per reconcile.
	clusters := make(map[string]rollout.Cluster, len(selected))
	current := false
	if c := meta.FindStatusCondition(root.Status.Conditions, rolloutCondition); c != nil && c.ObservedGeneration == root.Generation {
		current = true
		for _, line := range root.Status.Status {
			if line != nil && selected.Has(line.ClusterName) {
				clusters[line.ClusterName] = rollout.Cluster{Status: line.RolloutStatus, LastTransitionTime: line.LastTransitionTime}
			}
		}
	}
	anyActive := false
	for name := range selected {
		if rep := in.replicas[name]; rep != nil && specMatches(rep, sp.hash[active(name)]) {
			c := clusters[name]
			c.Active = true
			c.Reported = reportOf(rep)
			anyActive = true
			clusters[name] = c
		} else if _, ok := clusters[name]; !ok {
			clusters[name] = rollout.Cluster{}
		}
	}
	rin := rollout.Input{Mode: mode, Strategy: strategy, Groups: in.groups, Selected: selected, Clusters: clusters,
		Root: root.Namespace + "/" + root.Name}
	// Pass 1 of a progressive rollout: nothing recorded for this generation yet. A replica that
	// already enforces this generation means turns were handed out and the record was lost; the
	// planner takes that as evidence instead of starting over.
	firstPass := mode == rollout.Progressive && !current && !anyActive
	var d rollout.Decision
	var err error
	if firstPass {
		d, err = planner.FirstPass(rin)
	} else {
		d, err = planner.Plan(rin)
	}
	if err != nil {
		return out, err
	}
	out.decision, out.input = d, rin
	out.groups = in.groups
	// Sized once: grown entry by entry, the map of a 3,000-cluster root was rehashed on its way up
	// in every reconcile (4 % of the hub's CPU in a ProgressivePerGroup turn at 150,000).
	out.desired = make(map[string]*policyv1.PolicySpec, len(d.Clusters))
	for name, c := range d.Clusters {
		spec := active(name)
		if c.Status == policyv1.RolloutToApply {
			spec = sp.inform
		}
		out.desired[name] = spec
		// Only what was reported: a missing entry reads as nothing reported, and a fleet that has
		// not reported yet costs no map.
		if rep := in.replicas[name]; rep != nil && specMatches(rep, sp.hash[spec]) {
			if state := reportOf(rep); state != "" {
				out.compliance[name] = state
			}
		}
	}
	return out, nil
}

// reportOf is the replica's compliance when the managed cluster evaluated the replica's current
// generation (the contract with the spoke), and nothing otherwise.
func reportOf(rep *CachedReplica) policyv1.ComplianceState {
	if rep.lastEvaluatedGeneration != rep.generation {
		return ""
	}
	return rep.compliance
}
