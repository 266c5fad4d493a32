package propagator

import (
	"bytes"
	"encoding/json"
	"sort"
	"strconv"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// A root's status carries one line per selected cluster (~130 bytes each, ~400 KB at 3,000
// clusters), and a rollout turn changes a hundred of them. A merge patch cannot say that: JSON
// merge patch replaces a list whole, and client.MergeFrom serializes the root twice and diffs the
// two documents to find it out. rootStatusPatch writes a JSON patch (RFC 6902) of what changed
// instead: the top-level status fields that differ, and of the lines only the changed ones, each
// guarded by a test of its cluster's name at its index, so a server whose lines are not the ones
// the cache holds refuses the patch instead of taking a line at the wrong place.

// maxLineOps is how many changed lines are patched one by one; past it the list is sent whole.
// The apiserver refuses a JSON patch of more than 10,000 operations (two per line here), and
// the list whole costs no more than its lines one at a time.
const maxLineOps = 1000

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// rootStatusPatch is the JSON patch that turns before into after on a root whose stored status is
// before. An empty patch means nothing differs.
func rootStatusPatch(before, after *policyv1.PolicyStatus) ([]byte, error) {
	was, err := topFields(before)
	if err != nil {
		return nil, err
	}
	if len(was) == 0 && len(before.Status) == 0 {
		// The stored root may have no status at all: there is no /status to add fields to.
		return wholeStatusPatch(after)
	}
	ops, err := fieldOps(was, after)
	if err != nil {
		return nil, err
	}
	switch {
	case sameClusters(before.Status, after.Status) && changedLines(before.Status, after.Status) <= maxLineOps:
		for i, l := range after.Status {
			if lineEqual(before.Status[i], l) {
				continue
			}
			at := "/status/status/" + strconv.Itoa(i)
			ops = append(ops, jsonPatchOp{Op: "test", Path: at + "/clustername", Value: l.ClusterName},
				jsonPatchOp{Op: "replace", Path: at, Value: l})
		}
	case sameClusters(before.Status, after.Status):
		ops = append(ops, jsonPatchOp{Op: "replace", Path: "/status/status", Value: after.Status})
	case len(after.Status) == 0:
		ops = append(ops, jsonPatchOp{Op: "remove", Path: "/status/status"})
	default:
		// add replaces a member that exists and creates one that does not.
		ops = append(ops, jsonPatchOp{Op: "add", Path: "/status/status", Value: after.Status})
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

// wholeStatusPatch replaces the root's status, whatever the server holds: for a root without one,
// and after a patch whose tests failed.
func wholeStatusPatch(after *policyv1.PolicyStatus) ([]byte, error) {
	return json.Marshal([]jsonPatchOp{{Op: "add", Path: "/status", Value: after}})
}

// fieldOps are the operations on every status field but the per-cluster lines (was: before's,
// from topFields), compared as the JSON they serialize to (they are small: placements, conditions, aggregates).
func fieldOps(was map[string]json.RawMessage, after *policyv1.PolicyStatus) ([]jsonPatchOp, error) {
	now, err := topFields(after)
	if err != nil {
		return nil, err
	}
	var ops []jsonPatchOp
	for name, v := range now {
		if !bytes.Equal(was[name], v) {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/status/" + name, Value: v})
		}
	}
	for name := range was {
		if _, ok := now[name]; !ok {
			ops = append(ops, jsonPatchOp{Op: "remove", Path: "/status/" + name})
		}
	}
	// One status, one patch: map order must not make two.
	sort.Slice(ops, func(i, j int) bool { return ops[i].Path < ops[j].Path })
	return ops, nil
}

func topFields(s *policyv1.PolicyStatus) (map[string]json.RawMessage, error) {
	rest := *s
	rest.Status = nil
	raw, err := json.Marshal(&rest)
	if err != nil {
		return nil, err
	}
	fields := map[string]json.RawMessage{}
	return fields, json.Unmarshal(raw, &fields)
}

// sameClusters says whether the two lists name the same clusters at the same indexes.
func sameClusters(before, after []*policyv1.CompliancePerClusterStatus) bool {
	if len(before) != len(after) {
		return false
	}
	for i := range after {
		if before[i] == nil || after[i] == nil || before[i].ClusterName != after[i].ClusterName {
			return false
		}
	}
	return true
}

func changedLines(before, after []*policyv1.CompliancePerClusterStatus) int {
	n := 0
	for i := range after {
		if !lineEqual(before[i], after[i]) {
			n++
		}
	}
	return n
}

// lineEqual compares two lines as the apiserver stores them: times to the second.
func lineEqual(a, b *policyv1.CompliancePerClusterStatus) bool {
	if a == b {
		return true
	}
	if a.ComplianceState != b.ComplianceState || a.RolloutStatus != b.RolloutStatus ||
		a.ClusterName != b.ClusterName || a.ClusterNamespace != b.ClusterNamespace {
		return false
	}
	if (a.LastTransitionTime == nil) != (b.LastTransitionTime == nil) ||
		a.LastTransitionTime != nil && !a.LastTransitionTime.Rfc3339Copy().Time.Equal(b.LastTransitionTime.Rfc3339Copy().Time) {
		return false
	}
	return (a.Violations == nil) == (b.Violations == nil) && (a.Violations == nil || *a.Violations == *b.Violations)
}
