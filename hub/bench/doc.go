// Package bench measures propagation on one hub apiserver against a plain client-go create loop
// at the same QPS and burst, and against the apiserver's unthrottled ceiling; the figures and the
// commands live in hub/BENCHMARKS.md. The hub runs as a child process (this test binary again) so
// its peak RSS is its own.
package bench
