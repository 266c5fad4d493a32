package rollout

import (
	"testing"

	policyv1 "regent.dev/regent/api/policy/v1"
)

func TestObserve_DerivesClusterStatusFromTheReplicaReport(t *testing.T) {
	const (
		toApply     = policyv1.RolloutToApply
		progressing = policyv1.RolloutProgressing
		succeeded   = policyv1.RolloutSucceeded
		failed      = policyv1.RolloutFailed
		timeOut     = policyv1.RolloutTimeOut
	)
	tests := []struct {
		name string
		mode Mode
		c    Cluster
		want policyv1.RolloutStatus
	}{
		{"new cluster in a progressive rollout waits its turn", Progressive, Cluster{}, toApply},
		{"new cluster of an All rollout is progressing at once", AsIs, Cluster{}, progressing},
		{"ToApply ignores the report of its inform copy", Progressive, Cluster{Status: toApply, Reported: policyv1.NonCompliant}, toApply},
		{"an already enforced replica is evidence the cluster was started", Progressive, Cluster{Status: toApply, Active: true}, progressing},
		{"compliant at the current generation succeeds", Progressive, Cluster{Status: progressing, Active: true, Reported: policyv1.Compliant}, succeeded},
		{"non-compliant at the current generation fails", Progressive, Cluster{Status: progressing, Active: true, Reported: policyv1.NonCompliant}, failed},
		{"pending is not a result", Progressive, Cluster{Status: progressing, Active: true, Reported: policyv1.Pending}, progressing},
		{"a failed cluster that turns compliant succeeds", AsIs, Cluster{Status: failed, Active: true, Reported: policyv1.Compliant}, succeeded},
		{"a result for an older generation is no result", AsIs, Cluster{Status: succeeded, Active: true}, progressing},
		{"a timed-out cluster that answers compliant succeeds", Progressive, Cluster{Status: timeOut, Active: true, Reported: policyv1.Compliant}, succeeded},
		{"a timed-out cluster that answers non-compliant stays timed out", Progressive, Cluster{Status: timeOut, Active: true, Reported: policyv1.NonCompliant}, timeOut},
		{"a timed-out cluster without an answer stays timed out", Progressive, Cluster{Status: timeOut, Active: true}, timeOut},
		{"an inform root succeeds on any evaluation", InformAsIs, Cluster{Status: progressing, Active: true, Reported: policyv1.NonCompliant}, succeeded},
		{"an inform root without evaluation progresses", InformAsIs, Cluster{Status: progressing, Active: true}, progressing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := observe(tt.mode, tt.c); got != tt.want {
				t.Fatalf("observe = %s, want %s", got, tt.want)
			}
		})
	}
}
