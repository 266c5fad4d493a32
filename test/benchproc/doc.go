// Package benchproc runs the measured side of a benchmark as a child process: the benchmark's
// test binary started again on one test function, with what it needs in its environment. A child
// of its own gives the figures the benchmarks report (peak RSS, CPU seconds, the requests its
// client-go counted) to the measured controller alone, not to the apiservers and load generators
// of the parent.
//
// The parent calls Start; the child's test function calls Child first and returns at once when it
// is not a child, so that `go test` without the benchmark's environment runs it as a no-op.
package benchproc
