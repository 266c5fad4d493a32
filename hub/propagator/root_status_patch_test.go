package propagator

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	jsonpatch "github.com/evanphx/json-patch/v5"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

func lines(n int, status policyv1.RolloutStatus, at time.Time) []*policyv1.CompliancePerClusterStatus {
	out := make([]*policyv1.CompliancePerClusterStatus, n)
	for i := range out {
		name := fmt.Sprintf("c%04d", i)
		out[i] = &policyv1.CompliancePerClusterStatus{ClusterName: name, ClusterNamespace: name, RolloutStatus: status,
			LastTransitionTime: &metav1.Time{Time: at}}
	}
	return out
}

// applied is the stored root's document after patch, as the apiserver would compute it.
func applied(t *testing.T, stored map[string]any, patch []byte) (map[string]any, error) {
	t.Helper()
	doc, err := json.Marshal(stored)
	if err != nil {
		t.Fatal(err)
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("patch %s does not decode: %v", patch, err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(out, &m)
}

// document is a root as JSON decodes it, with status s (none when s is empty).
func document(t *testing.T, s *policyv1.PolicyStatus) map[string]any {
	t.Helper()
	raw, err := json.Marshal(&policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}, Status: *s})
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		t.Fatal(err)
	}
	if st, ok := m["status"].(map[string]any); ok && len(st) == 0 {
		delete(m, "status") // as the apiserver stores a root nothing wrote a status to
	}
	return m
}

func TestRootStatusPatch_TurnsTheStoredStatusIntoTheNewOne(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	t1 := t0.Add(time.Minute)
	progressing := metav1.Condition{Type: rolloutCondition, Status: metav1.ConditionFalse, Reason: "Progressing",
		Message: "0 of 3000 clusters succeeded", LastTransitionTime: metav1.NewTime(t0)}
	base := func() *policyv1.PolicyStatus {
		return &policyv1.PolicyStatus{ComplianceState: policyv1.Pending, RolloutStatus: policyv1.RolloutProgressing,
			Conditions: []metav1.Condition{progressing}, Status: lines(3000, policyv1.RolloutToApply, t0)}
	}
	turn := func(s *policyv1.PolicyStatus) *policyv1.PolicyStatus {
		s.Status = lines(3000, policyv1.RolloutToApply, t0)
		for i := 100; i < 200; i++ {
			s.Status[i].RolloutStatus, s.Status[i].LastTransitionTime = policyv1.RolloutProgressing, &metav1.Time{Time: t1}
		}
		s.Conditions[0].Message = "100 of 3000 clusters succeeded"
		return s
	}
	cases := []struct {
		name          string
		before, after *policyv1.PolicyStatus
		// maxOps bounds the patch's operations where its size is the point; 0: unbounded.
		maxOps int
	}{
		{name: "a root without status gets one", before: &policyv1.PolicyStatus{}, after: base()},
		{name: "a group's turn changes its lines and a condition's message", before: base(), after: turn(base()), maxOps: 201},
		{name: "one cluster's violations counted", before: base(), maxOps: 2, after: func() *policyv1.PolicyStatus {
			s := base()
			s.Status[7] = s.Status[7].DeepCopy()
			s.Status[7].Violations = new(int64)
			return s
		}()},
		{name: "a cleared field is removed", before: base(), maxOps: 1, after: func() *policyv1.PolicyStatus {
			s := base()
			s.ComplianceState = ""
			return s
		}()},
		{name: "a cluster leaves the placement", before: base(), after: func() *policyv1.PolicyStatus {
			s := base()
			s.Status = append(s.Status[:10:10], s.Status[11:]...)
			return s
		}()},
		{name: "every cluster leaves", before: base(), after: func() *policyv1.PolicyStatus {
			s := base()
			s.Status, s.ComplianceState, s.RolloutStatus = nil, "", ""
			return s
		}()},
		{name: "every line changes: the list goes whole", before: base(), maxOps: 2, after: func() *policyv1.PolicyStatus {
			s := base()
			s.Status = lines(3000, policyv1.RolloutSucceeded, t1)
			return s
		}()},
		{name: "nothing changed but the time's nanoseconds", before: base(), maxOps: -1, after: func() *policyv1.PolicyStatus {
			s := base()
			s.Status = lines(3000, policyv1.RolloutToApply, t0.Add(time.Millisecond))
			return s
		}()},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			patch, err := rootStatusPatch(tc.before, tc.after)
			if err != nil {
				t.Fatal(err)
			}
			if tc.maxOps < 0 {
				if patch != nil {
					t.Fatalf("patch %s for an unchanged status, want none", patch)
				}
				return
			}
			var ops []map[string]any
			if err := json.Unmarshal(patch, &ops); err != nil {
				t.Fatal(err)
			}
			if tc.maxOps > 0 && len(ops) > tc.maxOps {
				t.Errorf("%d operations, want at most %d", len(ops), tc.maxOps)
			}
			got, err := applied(t, document(t, tc.before), patch)
			if err != nil {
				t.Fatalf("patch does not apply to the status it was computed from: %v", err)
			}
			if want := document(t, tc.after); !reflect.DeepEqual(got, want) {
				t.Errorf("patched root differs from the status asked for:\n got %.600v\nwant %.600v", got, want)
			}
		})
	}
}

// A server whose lines are not where the cache has them refuses the patch rather than writing a
// cluster's line over another's.
func TestRootStatusPatch_RefusedWhereTheServersLinesMoved(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	cached := &policyv1.PolicyStatus{Status: lines(3, policyv1.RolloutToApply, t0)}
	after := &policyv1.PolicyStatus{Status: lines(3, policyv1.RolloutToApply, t0)}
	after.Status[0].RolloutStatus = policyv1.RolloutProgressing
	server := &policyv1.PolicyStatus{Status: []*policyv1.CompliancePerClusterStatus{cached.Status[2], cached.Status[1], cached.Status[0]}}
	patch, err := rootStatusPatch(cached, after)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := applied(t, document(t, server), patch); err == nil || !strings.Contains(err.Error(), "test") {
		t.Fatalf("patch %s applied to lines in another order (err %v), want its test to fail", patch, err)
	}
}
