// Package loadgen drives HTTPS endpoints for Regent's benchmark commands and chaos tests, in two
// ways.
//
// The closed loop (Run) has a fixed number of workers, each sending its next request when the last
// one is answered: it finds a server's throughput, but a slow answer also slows the sender, so its
// latencies hide queueing (coordinated omission).
//
// The open loop (OpenLoop) sends at a fixed rate whatever the answers' pace, as an apiserver's
// admission traffic arrives, and measures each latency from the moment the request was due, not
// from when it went out: a stalled server or a late generator shows in the percentiles instead of
// thinning the load. Each request ends as one Outcome (correct, turned away with 429, wrong,
// failed); a sweep of rates gives a server's knee (Knee), the highest rate it serves correctly
// within a latency bound.
package loadgen
