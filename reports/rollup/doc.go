// Package rollup carries a managed cluster's policy reports to the hub. It runs in the spoke
// addon, reads the openreports Reports and ClusterReports the aggregator (package aggregate)
// wrote on the cluster, maps each report's policy back to the replicated OCM Policy whose template
// created it (the policy.open-cluster-management.io/policy label templatesync sets), and writes one
// openreports Report per replicated policy into the cluster's namespace on the hub: the summed
// counts and the few worst results, bounded in bytes, so a hub serving thousands of clusters holds
// a summary per cluster and policy rather than every result of every cluster. The hub's
// propagator reads the fail counts into each root Policy's per-cluster status.
package rollup
