package rollout

import "maps"

// Settles says whether d is what Plan decides again once d is recorded: whether the root's status
// holding d is a fixed point. The hub reconciles nothing on the echo of its own status write, so a
// decision that does not settle must be asked for again, and only the hub knows.
//
// Most decisions settle (a started cluster stays in flight, an answer stays counted), but not all:
// sdk-go walks the mandatory groups first with every cluster's status, and a cluster of a later
// group whose deadline passed ends that walk with its TimeOut, before the later group counts it
// against the failure budget. The next decision, reading the TimeOut, spends the budget.
func (p *Planner) Settles(in Input, d Decision) bool {
	again := in
	// Unkeyed: this question must neither answer from nor teach the settled decisions.
	again.Root = ""
	again.Clusters = maps.Clone(in.Clusters)
	changed := false
	for name, c := range d.Clusters {
		was := in.Clusters[name]
		changed = changed || !sameRecord(was, c)
		was.Status, was.LastTransitionTime = c.Status, c.LastTransitionTime
		again.Clusters[name] = was
	}
	if !changed {
		// d is its own input's answer.
		return true
	}
	next, err := p.plan(again)
	if err != nil {
		return false
	}
	if next.BudgetSpent != d.BudgetSpent || next.Aggregate != d.Aggregate || len(next.Started)+len(next.TimedOut) > 0 {
		return false
	}
	for name, c := range next.Clusters {
		if !sameRecord(d.Clusters[name], c) {
			return false
		}
	}
	return true
}

// sameRecord says whether two states of a cluster record the same status since the same time.
func sameRecord(a, b Cluster) bool {
	return a.Status == b.Status && a.LastTransitionTime.Equal(b.LastTransitionTime)
}
