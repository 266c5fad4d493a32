package fleet

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
)

func TestAddonAvailability_FollowsOCMsRegistrationAgent(t *testing.T) {
	renewed := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	grace := 5 * time.Minute
	leaseRenewedAt := func(at *time.Time) *coordinationv1.Lease {
		l := &coordinationv1.Lease{}
		if at != nil {
			l.Spec.RenewTime = &metav1.MicroTime{Time: *at}
		}
		return l
	}
	future := renewed.Add(time.Hour)
	for _, tc := range []struct {
		name        string
		lease       *coordinationv1.Lease
		now         time.Time
		status      metav1.ConditionStatus
		reason, msg string
		expires     time.Time
	}{
		{"NoLeaseIsUnknown", nil, renewed, metav1.ConditionUnknown,
			"ManagedClusterAddOnLeaseNotFound", "The status of regent add-on is unknown.", time.Time{}},
		{"JustRenewedIsAvailableUntilTheGraceRunsOut", leaseRenewedAt(&renewed), renewed, metav1.ConditionTrue,
			"ManagedClusterAddOnLeaseUpdated", "regent add-on is available.", renewed.Add(grace)},
		{"LastMomentOfTheGraceIsStillAvailable", leaseRenewedAt(&renewed), renewed.Add(grace - time.Nanosecond), metav1.ConditionTrue,
			"ManagedClusterAddOnLeaseUpdated", "regent add-on is available.", renewed.Add(grace)},
		{"GraceRunOutIsNotAvailable", leaseRenewedAt(&renewed), renewed.Add(grace), metav1.ConditionFalse,
			"ManagedClusterAddOnLeaseUpdateStopped", "regent add-on is not available.", time.Time{}},
		{"LongStoppedIsNotAvailable", leaseRenewedAt(&renewed), renewed.Add(24 * time.Hour), metav1.ConditionFalse,
			"ManagedClusterAddOnLeaseUpdateStopped", "regent add-on is not available.", time.Time{}},
		{"NeverRenewedIsNotAvailable", leaseRenewedAt(nil), renewed, metav1.ConditionFalse,
			"ManagedClusterAddOnLeaseUpdateStopped", "regent add-on is not available.", time.Time{}},
		{"RenewedAheadOfOurClockIsAvailable", leaseRenewedAt(&future), renewed, metav1.ConditionTrue,
			"ManagedClusterAddOnLeaseUpdated", "regent add-on is available.", future.Add(grace)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cond, expires := addonAvailability("regent", tc.lease, tc.now, grace)
			if cond.Type != "Available" || cond.Status != tc.status || cond.Reason != tc.reason || cond.Message != tc.msg {
				t.Errorf("condition %+v, want Available %s %s %q", cond, tc.status, tc.reason, tc.msg)
			}
			if !expires.Equal(tc.expires) {
				t.Errorf("expires %s, want %s", expires, tc.expires)
			}
		})
	}
}

func TestAddonLeaseNamespace_StatusThenSpecThenOCMsDefault(t *testing.T) {
	addon := &addonv1alpha1.ManagedClusterAddOn{}
	if ns := addonLeaseNamespace(addon); ns != "open-cluster-management-agent-addon" {
		t.Errorf("nothing named: %q", ns)
	}
	addon.Spec.InstallNamespace = "asked"
	if ns := addonLeaseNamespace(addon); ns != "asked" {
		t.Errorf("spec.installNamespace: %q", ns)
	}
	addon.Status.Namespace = "reported"
	if ns := addonLeaseNamespace(addon); ns != "reported" {
		t.Errorf("status.namespace over spec: %q", ns)
	}
}

func TestAddonHealthFromLease_LeavesCustomizedAndHostedAddonsAlone(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mode   addonv1alpha1.HealthCheckMode
		hosted string
		want   bool
	}{
		{"ModeNotYetSet", "", "", true},
		{"LeaseMode", addonv1alpha1.HealthCheckModeLease, "", true},
		{"CustomizedMode", addonv1alpha1.HealthCheckModeCustomized, "", false},
		{"HostedElsewhere", addonv1alpha1.HealthCheckModeLease, "hosting", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addon := &addonv1alpha1.ManagedClusterAddOn{}
			addon.Status.HealthCheck.Mode = tc.mode
			if tc.hosted != "" {
				addon.Annotations = map[string]string{addonv1alpha1.HostingClusterNameAnnotationKey: tc.hosted}
			}
			if got := addonHealthFromLease(addon); got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSameAvailability_IgnoresOnlyTheTransitionTime(t *testing.T) {
	want, _ := addonAvailability("regent", nil, time.Now(), time.Minute)
	have := want
	have.LastTransitionTime = metav1.NewTime(time.Now().Add(-time.Hour))
	if !sameAvailability(&have, want) {
		t.Error("same status, reason and message at another time should need no write")
	}
	if sameAvailability(nil, want) {
		t.Error("a missing condition needs a write")
	}
	have.Message = "edited by hand"
	if sameAvailability(&have, want) {
		t.Error("a different message needs a write")
	}
}
