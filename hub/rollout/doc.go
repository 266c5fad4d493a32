// Package rollout decides, for one root Policy, the rollout status of every selected cluster and
// which clusters are enforced next. It is pure: plain inputs (what the root's status recorded, what
// each replica reports, the decision groups, the strategy, the time) in, plain outputs out.
//
// The arithmetic of the strategies — concurrency, soak time, progress deadline, failure budget,
// mandatory groups — is sdk-go's RolloutHandler; this package only derives each cluster's status
// from the contract with the managed cluster (Compliant or NonCompliant at the generation of the
// replica it evaluated) and applies the handler's answer. sdk-go reads time from its package-wide
// RolloutClock, so a Planner installs its clock there: one clock per process.
package rollout
