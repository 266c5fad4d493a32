package configpolicy

import (
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"regent.dev/regent/addonidentity"
)

// writeFailure is the detail of an enforce write the API server refused. A Forbidden one names
// the permission the spoke addon lacks and how a cluster's admin grants it: the addon's policy
// permissions are an aggregated ClusterRole, so one labelled ClusterRole adds a kind.
func writeFailure(verb string, t *template, err error) string {
	if !apierrors.IsForbidden(err) {
		return err.Error()
	}
	return fmt.Sprintf("%v (the spoke addon may not %s %s in API group %q: grant it with a ClusterRole labelled %s: \"true\", see docs/install.md)",
		err, verb, t.resource, t.gvk.Group, addonidentity.AggregateToSpokeAddonLabel)
}
