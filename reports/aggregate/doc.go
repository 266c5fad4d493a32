// Package aggregate is the report aggregator: it merges the per-resource reports of a namespace
// (ResourceReports; ClusterResourceReports for the cluster scope, namespace "") into openreports.io
// Reports (ClusterReports), one per policy — "pol-<name>" for a namespaced policy, "cpol-<name>"
// for a cluster-wide one, as a result's regent.dev/policy-scope property says — with sorted
// results and a summary. The work unit is a namespace: every change to a report of the namespace
// enqueues it after a short debounce, so a burst of writes costs one merge; each merge writes only
// the Reports whose bytes changed and deletes the Reports it owns (label
// reports.regent.dev/aggregated-by) that should no longer exist. A Report that would hold more
// than MaxResults results is split into parts "<name>", "<name>-part-2", …; a shard ("i/n") owns
// the namespaces whose FNV-1a hash is i modulo n, so n aggregators split a cluster.
//
// Merge is the pure computation; Aggregator is the controller around it.
package aggregate
