// Package decisions reads OCM PlacementDecisions for sdk-go's rollout machinery.
//
// sdk-go's PlacementDecisionClustersTracker turns the decisions of one Placement into decision
// groups; its PlacementDecisionGetter is meant to be backed by an informer cache, and Getter is
// that adapter over a controller-runtime cache. A Policy may be bound to several Placements, while
// sdk-go's RolloutHandler takes one tracker: Merge concatenates the groups of several Placements,
// one Placement after the other, into a single tracker, which gives All and Progressive the union
// of the clusters and ProgressivePerGroup "one placement's groups, then the next".
package decisions
