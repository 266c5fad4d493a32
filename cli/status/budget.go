package status

import (
	"math"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// applyBudgets fills the failure budgets as sdk-go's RolloutHandler counts them: Progressive over
// all selected clusters, ProgressivePerGroup per group; a mandatory group tolerates no failure. A
// root that is not rolled out progressively has no budget.
func applyBudgets(r *Rollout, s clusterv1alpha1.RolloutStrategy, cfg clusterv1alpha1.RolloutConfig) {
	if !r.Progressive {
		return
	}
	failing := func(cs []ClusterState) int {
		n := 0
		for _, c := range cs {
			if c.Status == policyv1.RolloutFailed || c.Status == policyv1.RolloutTimeOut {
				n++
			}
		}
		return n
	}
	total := 0
	for _, g := range r.Groups {
		if g.Index >= 0 {
			total += len(g.Clusters)
		}
	}
	for i := range r.Groups {
		g := &r.Groups[i]
		if g.Index < 0 {
			continue
		}
		switch {
		case g.Mandatory:
			g.Budget = &Budget{Used: failing(g.Clusters), Allowed: 0}
		case s.Type == clusterv1alpha1.ProgressivePerGroup:
			g.Budget = &Budget{Used: failing(g.Clusters), Allowed: rolloutSize(cfg.MaxFailures, len(g.Clusters))}
		}
		if g.Budget != nil {
			g.Budget.Spent = g.Budget.Used > g.Budget.Allowed
		}
	}
	if s.Type == clusterv1alpha1.Progressive {
		used := 0
		for _, g := range r.Groups {
			if g.Index >= 0 && !g.Mandatory {
				used += failing(g.Clusters)
			}
		}
		r.Budget = &Budget{Used: used, Allowed: rolloutSize(cfg.MaxFailures, total)}
		r.Budget.Spent = used > r.Budget.Allowed
	}
}

// rolloutSize is sdk-go's reading of maxFailures: a count, or a percentage of total rounded up; out
// of range (or unparsable, which the hub reports on the root) is zero.
func rolloutSize(v intstr.IntOrString, total int) int {
	n := 0
	switch v.Type {
	case intstr.Int:
		n = v.IntValue()
	case intstr.String:
		if p, err := strconv.ParseFloat(strings.TrimSuffix(v.StrVal, "%"), 64); err == nil && strings.HasSuffix(v.StrVal, "%") {
			n = int(math.Ceil(p / 100 * float64(total)))
		}
	}
	if n <= 0 || n > total {
		return 0
	}
	return n
}
