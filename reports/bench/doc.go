// Package bench measures the reports pipeline on one real apiserver: what a per-resource report
// costs in etcd and in apiserver requests, and the aggregator's peak memory and time to converge,
// at 10,000 or 100,000 resources. The aggregator runs as a child process (this test binary again)
// so its peak RSS is its own. Figures and commands: docs/benchmarks.md.
package bench
