package propagator

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	sdkv1beta1 "open-cluster-management.io/sdk-go/pkg/apis/cluster/v1beta1"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/rollout"
)

func TestGroupSteps_NameTheGroupsThatStartedAndCompleted(t *testing.T) {
	groups := sdkv1beta1.ClusterGroupsMap{
		{GroupName: "canary", GroupIndex: 0}: sets.New("c1"),
		{GroupIndex: 1}:                      sets.New("c2", "c3"),
	}
	status := func(pairs ...string) []*policyv1.CompliancePerClusterStatus {
		var out []*policyv1.CompliancePerClusterStatus
		for i := 0; i < len(pairs); i += 2 {
			out = append(out, &policyv1.CompliancePerClusterStatus{ClusterName: pairs[i], RolloutStatus: policyv1.RolloutStatus(pairs[i+1])})
		}
		return out
	}
	decision := func(started []string, pairs ...string) rollout.Decision {
		d := rollout.Decision{Started: started, Clusters: map[string]rollout.Cluster{}}
		for i := 0; i < len(pairs); i += 2 {
			d.Clusters[pairs[i]] = rollout.Cluster{Status: policyv1.RolloutStatus(pairs[i+1])}
		}
		return d
	}
	for _, tc := range []struct {
		name               string
		before             []*policyv1.CompliancePerClusterStatus
		d                  rollout.Decision
		started, completed []string
	}{
		{"first group starts", status("c1", "ToApply", "c2", "ToApply", "c3", "ToApply"),
			decision([]string{"c1"}, "c1", "Progressing", "c2", "ToApply", "c3", "ToApply"), []string{`"canary" (index 0)`}, nil},
		{"first group completes as the second starts", status("c1", "Progressing", "c2", "ToApply", "c3", "ToApply"),
			decision([]string{"c2", "c3"}, "c1", "Succeeded", "c2", "Progressing", "c3", "Progressing"),
			[]string{"index 1"}, []string{`"canary" (index 0)`}},
		{"half a group done is not complete", status("c1", "Succeeded", "c2", "Progressing", "c3", "Progressing"),
			decision(nil, "c1", "Succeeded", "c2", "Succeeded", "c3", "Progressing"), nil, nil},
		{"a completed group is announced once", status("c1", "Succeeded", "c2", "Succeeded", "c3", "Succeeded"),
			decision(nil, "c1", "Succeeded", "c2", "Succeeded", "c3", "Succeeded"), nil, nil},
		// The turn of group 1 and c3's answer to it were held back from the record: the decision
		// that writes them started nobody itself.
		{"a turn held back from the record is announced with it", status("c1", "Progressing", "c2", "ToApply", "c3", "ToApply"),
			decision(nil, "c1", "Succeeded", "c2", "Progressing", "c3", "Succeeded"),
			[]string{"index 1"}, []string{`"canary" (index 0)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			record := &policyv1.PolicyStatus{Status: tc.before, Conditions: []metav1.Condition{{Type: rolloutCondition, ObservedGeneration: 2}}}
			started, completed := groupSteps(groups, tc.before, turnsTaken(2, record, tc.d), tc.d)
			if !reflect.DeepEqual(started, tc.started) || !reflect.DeepEqual(completed, tc.completed) {
				t.Fatalf("started %v completed %v, want %v %v", started, completed, tc.started, tc.completed)
			}
		})
	}
}

func TestTurnsTaken_AreTheDecisionsStartsPlusTheTurnsTheRecordHasNotSeen(t *testing.T) {
	line := func(cluster string, s policyv1.RolloutStatus) *policyv1.CompliancePerClusterStatus {
		return &policyv1.CompliancePerClusterStatus{ClusterName: cluster, RolloutStatus: s}
	}
	record := &policyv1.PolicyStatus{Conditions: []metav1.Condition{{Type: rolloutCondition, ObservedGeneration: 3}},
		Status: []*policyv1.CompliancePerClusterStatus{line("a", policyv1.RolloutSucceeded), line("b", policyv1.RolloutToApply),
			line("c", policyv1.RolloutToApply), line("d", policyv1.RolloutToApply)}}
	d := rollout.Decision{Started: []string{"d"}, Clusters: map[string]rollout.Cluster{
		"a": {Status: policyv1.RolloutSucceeded}, "b": {Status: policyv1.RolloutSucceeded},
		"c": {Status: policyv1.RolloutToApply}, "d": {Status: policyv1.RolloutProgressing}}}
	if got, want := turnsTaken(3, record, d), []string{"b", "d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("turns taken since the record: %v, want %v (b's held turn, d's own)", got, want)
	}
	// A record of an earlier generation's rollout says nothing of this one's turns.
	if got, want := turnsTaken(4, record, d), []string{"d"}; !reflect.DeepEqual(got, want) {
		t.Errorf("turns taken since another generation's record: %v, want %v", got, want)
	}
}
