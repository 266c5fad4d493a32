package admissionpolicy

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

var now = time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)

func ready(replica int32, gen int64, status metav1.ConditionStatus) kubewardenv1.ReplicaStatus {
	return kubewardenv1.ReplicaStatus{Replica: replica, Ready: status, PolicyGeneration: gen, Reason: "Loaded"}
}

func initialized(status metav1.ConditionStatus, reason string) kubewardenv1.PolicyCondition {
	return kubewardenv1.PolicyCondition{Type: kubewardenv1.ConditionInitialized, Status: status, Reason: reason}
}

// rev is a revision with the leader's conditions and the replicas' reports, in any order.
func rev(gen int64, reports ...any) revisionState {
	r := revisionState{Name: "clusterwide-p-g" + string(rune('0'+gen)), Generation: gen, Enabled: true, Mode: kubewardenv1.ModeProtect}
	for _, x := range reports {
		switch x := x.(type) {
		case kubewardenv1.PolicyCondition:
			r.Conditions = append(r.Conditions, x)
		case kubewardenv1.ReplicaStatus:
			r.Replicas = append(r.Replicas, x)
		default:
			panic(fmt.Sprintf("rev: %T", x))
		}
	}
	return r
}

func replicas(ns ...int32) map[int32]bool {
	m := map[int32]bool{}
	for _, n := range ns {
		m[n] = true
	}
	return m
}

func allReady(gen int64, ns ...int32) []any {
	out := []any{initialized(metav1.ConditionTrue, "Initialized")}
	for _, n := range ns {
		out = append(out, ready(n, gen, metav1.ConditionTrue))
	}
	return out
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name        string
		in          observed
		wantServing int64
		wantPhase   kubewardenv1.PolicyPhase
		wantCollect []string
		wantReady   map[int32]metav1.ConditionStatus
	}{{
		name:        "NewPolicy_NoReplicaReported_PendingAndNoWebhook",
		in:          observed{Generation: 1, Revisions: []revisionState{rev(1)}, Live: replicas(0, 1, 2)},
		wantPhase:   kubewardenv1.PhasePending,
		wantReady:   map[int32]metav1.ConditionStatus{0: "Unknown", 1: "Unknown", 2: "Unknown"},
		wantServing: 0,
	}, {
		name:        "EveryLiveReplicaReady_ServesAndActive",
		in:          observed{Generation: 1, Revisions: []revisionState{rev(1, allReady(1, 0, 1, 2)...)}, Live: replicas(0, 1, 2)},
		wantServing: 1, wantPhase: kubewardenv1.PhaseActive,
		wantReady: map[int32]metav1.ConditionStatus{0: "True", 1: "True", 2: "True"},
	}, {
		name:        "OneLiveReplicaMissing_StaysOnPreviousGeneration",
		in:          observed{Generation: 2, Serving: 1, Revisions: []revisionState{rev(1, allReady(1, 0, 1)...), rev(2, allReady(2, 0)...)}, Live: replicas(0, 1)},
		wantServing: 1, wantPhase: kubewardenv1.PhasePending,
		wantReady: map[int32]metav1.ConditionStatus{0: "True", 1: "Unknown"},
	}, {
		name:        "ReplicaWithExpiredLease_NeitherBlocksNorShows",
		in:          observed{Generation: 2, Serving: 1, Revisions: []revisionState{rev(1), rev(2, append(allReady(2, 0, 1), ready(2, 1, metav1.ConditionFalse))...)}, Live: replicas(0, 1)},
		wantServing: 2, wantPhase: kubewardenv1.PhaseActive,
		wantReady: map[int32]metav1.ConditionStatus{0: "True", 1: "True"},
	}, {
		name:        "NoLiveReplica_NeverServesAndSaysWhy",
		in:          observed{Generation: 1, Revisions: []revisionState{rev(1, allReady(1, 0)...)}, Live: replicas()},
		wantServing: 0, wantPhase: kubewardenv1.PhasePending, wantReady: map[int32]metav1.ConditionStatus{-1: "Unknown"},
	}, {
		name:        "InitializedFalse_FailedAndPreviousKeepsServing",
		in:          observed{Generation: 2, Serving: 1, Revisions: []revisionState{rev(1, allReady(1, 0)...), rev(2, initialized(metav1.ConditionFalse, "PullError"))}, Live: replicas(0)},
		wantServing: 1, wantPhase: kubewardenv1.PhaseFailed,
		wantReady: map[int32]metav1.ConditionStatus{0: "Unknown"},
	}, {
		name:        "ReplicaReadyFalse_Failed",
		in:          observed{Generation: 2, Serving: 1, Revisions: []revisionState{rev(1), rev(2, initialized("True", "Initialized"), ready(0, 2, "True"), ready(1, 2, "False"))}, Live: replicas(0, 1)},
		wantServing: 1, wantPhase: kubewardenv1.PhaseFailed,
		wantReady: map[int32]metav1.ConditionStatus{0: "True", 1: "False"},
	}, {
		name:        "ReadyForAnotherGeneration_DoesNotCount",
		in:          observed{Generation: 2, Serving: 1, Revisions: []revisionState{rev(1), rev(2, ready(0, 1, "True"))}, Live: replicas(0)},
		wantServing: 1, wantPhase: kubewardenv1.PhasePending,
		wantReady: map[int32]metav1.ConditionStatus{0: "Unknown"},
	}, {
		name:        "ServingNeverMovesBackward_WhenAReplicaReloads",
		in:          observed{Generation: 2, Serving: 2, Revisions: []revisionState{rev(1, allReady(1, 0)...), rev(2, initialized("True", "Initialized"))}, Live: replicas(0)},
		wantServing: 2, wantPhase: kubewardenv1.PhaseActive,
		wantReady: map[int32]metav1.ConditionStatus{0: "Unknown"},
	}, {
		name: "SkipsToNewestReadyGeneration",
		in: observed{Generation: 3, Serving: 1, Revisions: []revisionState{rev(1), rev(2, allReady(2, 0)...), rev(3, allReady(3, 0)...)},
			Live: replicas(0), Kept: 3},
		wantServing: 3, wantPhase: kubewardenv1.PhaseActive,
		wantReady: map[int32]metav1.ConditionStatus{0: "True"},
	}, {
		name: "BeyondKeptCount_CollectedOnceServing",
		in: observed{Generation: 5, Serving: 4, Revisions: []revisionState{rev(1), rev(2), rev(3), rev(4), rev(5, allReady(5, 0)...)},
			Live: replicas(0), Kept: 3},
		wantServing: 5, wantPhase: kubewardenv1.PhaseActive, wantCollect: []string{"clusterwide-p-g2", "clusterwide-p-g1"},
		wantReady: map[int32]metav1.ConditionStatus{0: "True"},
	}, {
		name: "ServingRevisionIsNeverCollected_EvenBeyondKeptCount",
		in: observed{Generation: 5, Serving: 1, Revisions: []revisionState{rev(1), rev(2), rev(3), rev(4), rev(5)},
			Live: replicas(0), Kept: 2},
		wantServing: 1, wantPhase: kubewardenv1.PhasePending, wantCollect: []string{"clusterwide-p-g3", "clusterwide-p-g2"},
		wantReady: map[int32]metav1.ConditionStatus{0: "Unknown"},
	}, {
		name:        "NothingServing_NothingCollected",
		in:          observed{Generation: 5, Revisions: []revisionState{rev(1), rev(2), rev(3), rev(4), rev(5)}, Live: replicas(0), Kept: 1},
		wantServing: 0, wantPhase: kubewardenv1.PhasePending,
		wantReady: map[int32]metav1.ConditionStatus{0: "Unknown"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.in.Now = now
			d := decide(tt.in)
			if d.Serving != tt.wantServing || d.Status.ServingGeneration != tt.wantServing {
				t.Errorf("serving = %d (status %d), want %d", d.Serving, d.Status.ServingGeneration, tt.wantServing)
			}
			if d.Status.Phase != tt.wantPhase {
				t.Errorf("phase = %s, want %s", d.Status.Phase, tt.wantPhase)
			}
			if !slices.Equal(d.Collect, tt.wantCollect) {
				t.Errorf("collect = %v, want %v", d.Collect, tt.wantCollect)
			}
			got := map[int32]metav1.ConditionStatus{}
			for _, rs := range d.Status.Replicas {
				got[rs.Replica] = rs.Ready
				if rs.PolicyGeneration != tt.in.Generation {
					t.Errorf("replica %d's report is about generation %d, want %d", rs.Replica, rs.PolicyGeneration, tt.in.Generation)
				}
			}
			// -1 is the policy-wide Ready when no replica is live: no report, Ready Unknown.
			wantSummary := metav1.ConditionTrue
			for n, s := range tt.wantReady {
				switch {
				case n == -1 || s == metav1.ConditionFalse:
					wantSummary = s
				case s == metav1.ConditionUnknown && wantSummary == metav1.ConditionTrue:
					wantSummary = s
				}
				if n == -1 {
					delete(tt.wantReady, n)
				}
			}
			if len(got) != len(tt.wantReady) {
				t.Errorf("replica reports = %v, want %v", got, tt.wantReady)
			}
			for n, s := range tt.wantReady {
				if got[n] != s {
					t.Errorf("Ready of replica %d = %s, want %s", n, got[n], s)
				}
			}
			seen := map[string]bool{}
			for _, c := range d.Status.Conditions {
				if seen[c.Type] {
					t.Errorf("condition %s appears twice: %+v", c.Type, d.Status.Conditions)
				}
				seen[c.Type] = true
				if c.ObservedGeneration != tt.in.Generation || c.Reason == "" || c.LastTransitionTime.IsZero() {
					t.Errorf("condition %+v: want observedGeneration %d, a reason and a transition time", c, tt.in.Generation)
				}
			}
			if c := findCondition(d.Status.Conditions, kubewardenv1.ConditionReady); c == nil || c.Status != wantSummary {
				t.Errorf("Ready = %+v, want %s", c, wantSummary)
			}
			wantActive := metav1.ConditionFalse
			if tt.wantServing == tt.in.Generation {
				wantActive = metav1.ConditionTrue
			}
			if c := findCondition(d.Status.Conditions, kubewardenv1.ConditionPolicyActive); c == nil || c.Status != wantActive {
				t.Errorf("PolicyActive = %+v, want %s", c, wantActive)
			}
			wantStatus := kubewardenv1.PolicyStatusPending
			if tt.wantServing > 0 {
				wantStatus = kubewardenv1.PolicyStatusActive
			}
			if d.Status.PolicyStatus != wantStatus {
				t.Errorf("policyStatus = %s, want %s", d.Status.PolicyStatus, wantStatus)
			}
		})
	}
}

func TestDecide_UnchangedStateKeepsTransitionTimes_SoNothingIsWritten(t *testing.T) {
	in := observed{Generation: 1, Revisions: []revisionState{rev(1, allReady(1, 0)...)}, Live: replicas(0), Now: now}
	first := decide(in)
	in.Previous, in.Serving, in.Now = first.Status, first.Serving, now.Add(time.Hour)
	second := decide(in)
	for i := range first.Status.Conditions {
		if !first.Status.Conditions[i].LastTransitionTime.Equal(&second.Status.Conditions[i].LastTransitionTime) {
			t.Errorf("condition %s moved its transition time", first.Status.Conditions[i].Type)
		}
	}
	for i := range first.Status.Replicas {
		if !first.Status.Replicas[i].LastTransitionTime.Equal(&second.Status.Replicas[i].LastTransitionTime) {
			t.Errorf("replica %d moved its transition time", first.Status.Replicas[i].Replica)
		}
	}
}

func TestDecide_ModeIsTheServingGenerations(t *testing.T) {
	monitor := rev(2)
	monitor.Mode = kubewardenv1.ModeMonitor
	d := decide(observed{Generation: 2, Serving: 1, Revisions: []revisionState{rev(1), monitor}, Live: replicas(0), Now: now})
	if d.Status.Mode != kubewardenv1.ModeProtect {
		t.Errorf("mode = %s while generation 1 serves, want protect", d.Status.Mode)
	}
}

func TestDecide_BlockedByAnotherPolicysObject_ServingStaysAndFailed(t *testing.T) {
	conflict := (&ownershipConflict{kind: "ValidatingWebhookConfiguration", name: "regent-x", owner: "AdmissionPolicy a/b"}).condition(5)
	d := decide(observed{Generation: 5, Serving: 4, Revisions: []revisionState{rev(1), rev(2), rev(3), rev(4), rev(5, allReady(5, 0)...)},
		Live: replicas(0), Kept: 3, Blocked: &conflict, Now: now})
	if d.Serving != 4 || d.Status.ServingGeneration != 4 || len(d.Collect) != 0 {
		t.Errorf("serving %d (status %d), collect %v; want generation 4 to keep serving and nothing collected", d.Serving, d.Status.ServingGeneration, d.Collect)
	}
	if c := findCondition(d.Status.Conditions, conditionConflict); d.Status.Phase != kubewardenv1.PhaseFailed || c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("phase %s, conditions %+v; want Failed with Conflict", d.Status.Phase, d.Status.Conditions)
	}
}

func TestDecide_PolicyServerMissing_Scheduled(t *testing.T) {
	d := decide(observed{Generation: 1, Revisions: []revisionState{rev(1)}, PolicyServerMissing: true, Now: now})
	if d.Status.PolicyStatus != kubewardenv1.PolicyStatusScheduled {
		t.Errorf("policyStatus = %s, want scheduled", d.Status.PolicyStatus)
	}
}

func TestDecide_NewGenerationPending_PolicyActiveFalseButStatusStaysActive(t *testing.T) {
	d := decide(observed{Generation: 2, Serving: 1, Revisions: []revisionState{rev(1, allReady(1, 0)...), rev(2)}, Live: replicas(0), Now: now})
	c := findCondition(d.Status.Conditions, kubewardenv1.ConditionPolicyActive)
	if d.Status.PolicyStatus != kubewardenv1.PolicyStatusActive || c.Status != metav1.ConditionFalse || c.Reason != "GenerationPending" {
		t.Errorf("policyStatus %s, PolicyActive %+v; want active (generation 1 answers) and PolicyActive False for generation 2", d.Status.PolicyStatus, c)
	}
}
