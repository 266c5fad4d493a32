// Package status answers the questions Regent's users ask every day, from the objects the hub and
// the managed clusters already carry: how far a rollout is and what it waits for (Rollout), why a
// cluster is where it is (Why), and what a managed cluster runs (Spoke). Nothing here writes; every
// figure — soak time left, deadline, failure budget — is computed from the root Policy's status,
// its rollout strategy and the placement decisions, with the same arithmetic as the hub's rollout
// (OCM sdk-go's), so the view and the hub cannot disagree.
//
// Views are plain structs built by pure functions from objects and a time, printed as a table, JSON
// or YAML; the cmd/regent wiring turns them into `regent status …` and `kubectl regent …`.
package status
