package hub

import (
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

var stripManagedFields = cache.TransformStripManagedFields()

// trimPolicy keeps in the cache only what the hub reads of a Policy. A replica's compliance
// history (status.details, up to ten entries per template in OCM) is the spoke's report to humans;
// the rollout reads only its aggregate compliance and evaluated generation, and a hub caches one
// replica per cluster and root. Of the details only an admission policy's serving generation
// stays, for the dashboard (servingDetails). What is left is shared with the other replicas where
// equal (propagator.CompactReplica).
func trimPolicy(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return obj, err
	}
	if p, ok := obj.(*policyv1.Policy); ok {
		if _, replica := p.Labels[propagator.RootPolicyLabel]; replica {
			p.Status.Details = servingDetails(p.Status.Details)
			propagator.TrimReplica(p)
			propagator.CompactReplica(p)
		} else {
			propagator.CompactRoot(p)
		}
	}
	return obj, nil
}

// trimReport keeps a rolled-up Report's summary and drops its worst results: the hub reads only
// the counts, and holds one summary per cluster and policy.
func trimReport(obj any) (any, error) {
	obj, err := stripManagedFields(obj)
	if err != nil {
		return obj, err
	}
	if r, ok := obj.(*openreportsv1alpha1.Report); ok {
		r.Results = nil
	}
	return obj, nil
}
