package fleet

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
)

// AddonLeaseGrace is how long after its last renewal OCM's registration agent still counts an
// addon's Lease as alive: five lease durations of 60 s.
const AddonLeaseGrace = 5 * 60 * time.Second

// defaultAddonInstallNamespace is where OCM looks for an addon's Lease when the addon names no
// namespace of its own.
const defaultAddonInstallNamespace = "open-cluster-management-agent-addon"

// The reasons OCM's registration agent gives on the Available condition; users and tools match
// on them, so they are OCM's words exactly.
const (
	reasonAddonLeaseUpdated     = "ManagedClusterAddOnLeaseUpdated"
	reasonAddonLeaseStopped     = "ManagedClusterAddOnLeaseUpdateStopped"
	reasonAddonLeaseNotFound    = "ManagedClusterAddOnLeaseNotFound"
	addonAvailableConditionType = addonv1alpha1.ManagedClusterAddOnConditionAvailable
)

// addonLeaseNamespace is where an addon's agent keeps its Lease, decided as OCM's registration
// agent decides it: the namespace the addon manager reported, else the one the addon asked for,
// else OCM's default.
func addonLeaseNamespace(addon *addonv1alpha1.ManagedClusterAddOn) string {
	switch {
	case addon.Status.Namespace != "":
		return addon.Status.Namespace
	case addon.Spec.InstallNamespace != "":
		return addon.Spec.InstallNamespace
	default:
		return defaultAddonInstallNamespace
	}
}

// addonHealthFromLease tells whether an addon's Available condition follows its Lease on the
// managed cluster. Customized mode hands health to the addon's own manager; a hosted addon keeps
// its Lease on a hosting cluster, which a local fleet does not have.
func addonHealthFromLease(addon *addonv1alpha1.ManagedClusterAddOn) bool {
	if addon.Status.HealthCheck.Mode == addonv1alpha1.HealthCheckModeCustomized {
		return false
	}
	return addon.Annotations[addonv1alpha1.HostingClusterNameAnnotationKey] == ""
}

// addonAvailability is the Available condition OCM's registration agent gives the addon named
// name when its Lease is lease (nil: there is none) at now, and the moment it turns False with
// no event to announce it (zero when only an event can change it).
func addonAvailability(name string, lease *coordinationv1.Lease, now time.Time, grace time.Duration) (metav1.Condition, time.Time) {
	if lease == nil {
		return metav1.Condition{Type: addonAvailableConditionType, Status: metav1.ConditionUnknown,
			Reason: reasonAddonLeaseNotFound, Message: fmt.Sprintf("The status of %s add-on is unknown.", name)}, time.Time{}
	}
	// A Lease never renewed says nothing about a live agent. (OCM's agent would dereference the
	// missing renewTime; addon-framework always sets it.)
	if lease.Spec.RenewTime != nil {
		if expires := lease.Spec.RenewTime.Add(grace); now.Before(expires) {
			return metav1.Condition{Type: addonAvailableConditionType, Status: metav1.ConditionTrue,
				Reason: reasonAddonLeaseUpdated, Message: fmt.Sprintf("%s add-on is available.", name)}, expires
		}
	}
	return metav1.Condition{Type: addonAvailableConditionType, Status: metav1.ConditionFalse,
		Reason: reasonAddonLeaseStopped, Message: fmt.Sprintf("%s add-on is not available.", name)}, time.Time{}
}

// sameAvailability reports whether have already says what want says; only then is no write due.
// The transition time is not compared: it is kept while the status stays.
func sameAvailability(have *metav1.Condition, want metav1.Condition) bool {
	return have != nil && have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message
}
