// Package statussync reports the managed cluster's view of each policy back to its hub replica:
// compliance, per-template details and lastEvaluatedGeneration — the generation of the hub
// replica the cluster evaluated, which the hub's rollout reads to tell a current answer from a
// stale one. It writes only those fields, and only when they changed.
package statussync
