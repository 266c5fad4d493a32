// Package bench measures propagation on one hub apiserver against a plain client-go create loop
// at the same QPS and burst, and against the apiserver's unthrottled ceiling; the figures and the
// commands live in hub/BENCHMARKS.md and docs/benchmarks.md. The hub runs as a child process (this
// test binary again) so its peak RSS is its own. BenchmarkPropagation rolls out with strategy All
// or, with REGENT_BENCH_STRATEGY=ProgressivePerGroup, over decision groups answered by simulated
// spokes; REGENT_BENCH_EDIT=1 then edits one root on the settled fleet and times it to every
// replica, counting the hub's requests per changed replica. REGENT_BENCH_CPU_PROFILE=<path> writes
// the hub child's CPU profile from its start to its stop (a restarted hub's to <path>.2), as
// REGENT_BENCH_HEAP_PROFILE writes its heap at the end and REGENT_BENCH_PEAK_HEAP_PROFILE=<path> at
// its highest live heap (to <path>.<pid>). With REGENT_BENCH_CPU_WINDOW=<path>, each SIGUSR1 to the
// hub child starts or stops a CPU profile to <path>.<n>: a profile of one phase of a long run.
// REGENT_BENCH_ROLLOUT_BUDGET=<s> bounds the wait for progressive rollouts to s seconds after the
// last replica exists, and REGENT_BENCH_HUB_WATCH_LOG=<file> logs the hub child's Policy lists and
// watches and how each watch stream ended. REGENT_BENCH_PEERS=rollout (progressive) holds the hub
// against a plain client that sends a whole rollout's writes beside the same simulated spokes.
// REGENT_BENCH_HUB_ROOT_STATUS_INTERVAL=<duration> is the hub child's --root-status-interval.
package bench
