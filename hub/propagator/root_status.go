package propagator

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/rollout"
)

// clusterLines turns a rollout decision, the clusters' compliance and their reported violations
// into the root's per-cluster status, sorted by cluster name so an unchanged fleet gives an
// identical status and no write. A cluster without a rolled-up report has no violations count.
func clusterLines(d rollout.Decision, compliance map[string]policyv1.ComplianceState, violations map[string]int64) []*policyv1.CompliancePerClusterStatus {
	lines := make([]*policyv1.CompliancePerClusterStatus, 0, len(d.Clusters))
	for name, c := range d.Clusters {
		var count *int64
		if v, ok := violations[name]; ok {
			count = &v
		}
		lines = append(lines, &policyv1.CompliancePerClusterStatus{
			Violations:         count,
			ComplianceState:    compliance[name],
			RolloutStatus:      c.Status,
			ClusterName:        name,
			ClusterNamespace:   name,
			LastTransitionTime: c.LastTransitionTime,
		})
	}
	sort.Slice(lines, func(i, j int) bool { return lines[i].ClusterName < lines[j].ClusterName })
	return lines
}

// linesCurrent says whether lines are what clusterLines would build, without building them.
func linesCurrent(lines []*policyv1.CompliancePerClusterStatus, d rollout.Decision, compliance map[string]policyv1.ComplianceState, violations map[string]int64) bool {
	if len(lines) != len(d.Clusters) {
		return false
	}
	for i, l := range lines {
		if l == nil || i > 0 && lines[i-1].ClusterName >= l.ClusterName {
			return false
		}
		c, ok := d.Clusters[l.ClusterName]
		if !ok || l.ClusterNamespace != l.ClusterName || l.RolloutStatus != c.Status || l.ComplianceState != compliance[l.ClusterName] {
			return false
		}
		if (l.LastTransitionTime == nil) != (c.LastTransitionTime == nil) ||
			l.LastTransitionTime != nil && !l.LastTransitionTime.Equal(c.LastTransitionTime) {
			return false
		}
		v, counted := violations[l.ClusterName]
		if (l.Violations != nil) != counted || counted && *l.Violations != v {
			return false
		}
	}
	return true
}

// aggregateCompliance follows OCM's precedence: NonCompliant over Pending over unknown over
// Compliant; no cluster at all is unknown.
func aggregateCompliance(lines []*policyv1.CompliancePerClusterStatus) policyv1.ComplianceState {
	if len(lines) == 0 {
		return ""
	}
	pending, unknown := false, false
	for _, l := range lines {
		switch l.ComplianceState {
		case policyv1.NonCompliant:
			return policyv1.NonCompliant
		case policyv1.Pending:
			pending = true
		case policyv1.Compliant:
		default:
			unknown = true
		}
	}
	switch {
	case pending:
		return policyv1.Pending
	case unknown:
		return ""
	}
	return policyv1.Compliant
}

// rolloutConditionFor says in words where the rollout stands. Its observedGeneration is the
// generation the rollout is for: a root whose generation moved past it starts over from pass 1.
func rolloutConditionFor(generation int64, d rollout.Decision, disabled bool) metav1.Condition {
	c := metav1.Condition{Type: rolloutCondition, ObservedGeneration: generation}
	switch {
	case disabled:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "Disabled", "the policy is disabled: no cluster has a replica"
	case len(d.Clusters) == 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, "NoClusters", "no placement decision selects a cluster"
	case d.BudgetSpent:
		c.Status, c.Reason = metav1.ConditionFalse, "FailureBudgetSpent"
		c.Message = fmt.Sprintf("rollout stopped: the failure budget is spent by %s; no further cluster is enforced", names(d.Failing))
	case d.Aggregate == policyv1.RolloutProgressing:
		c.Status, c.Reason = metav1.ConditionFalse, "Progressing"
		c.Message = fmt.Sprintf("%d of %d clusters succeeded", count(d, policyv1.RolloutSucceeded), len(d.Clusters))
	case d.Aggregate == policyv1.RolloutFailed:
		c.Status, c.Reason = metav1.ConditionFalse, "Failed"
		c.Message = fmt.Sprintf("rollout ended with failures on %s", names(d.Failing))
	default:
		c.Status, c.Reason = metav1.ConditionTrue, "Succeeded"
		c.Message = fmt.Sprintf("all %d clusters succeeded", len(d.Clusters))
	}
	return c
}

func overridesConditionFor(generation int64, ignored bool) *metav1.Condition {
	if !ignored {
		return nil
	}
	return &metav1.Condition{Type: overridesCondition, Status: metav1.ConditionTrue, ObservedGeneration: generation,
		Reason: "ProgressiveRollout", Message: "bindingOverrides.remediationAction is ignored: the rollout strategy is not All, so the rollout decides which clusters enforce"}
}

// setConditions applies the desired conditions, keeping transition times of unchanged ones.
func setConditions(conds *[]metav1.Condition, rollout metav1.Condition, overrides, deprecation *metav1.Condition) {
	meta.SetStatusCondition(conds, rollout)
	for kind, c := range map[string]*metav1.Condition{overridesCondition: overrides, deprecatedCondition: deprecation} {
		if c != nil {
			meta.SetStatusCondition(conds, *c)
		} else {
			meta.RemoveStatusCondition(conds, kind)
		}
	}
}

func count(d rollout.Decision, s policyv1.RolloutStatus) int {
	n := 0
	for _, c := range d.Clusters {
		if c.Status == s {
			n++
		}
	}
	return n
}

// names lists clusters for a message, at most ten so a large failure stays readable.
func names(clusters []string) string {
	if len(clusters) > 10 {
		return strings.Join(clusters[:10], ", ") + fmt.Sprintf(" and %d more", len(clusters)-10)
	}
	return strings.Join(clusters, ", ")
}
