package configpolicy

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/spoke-addon/compliancemessage"
)

// EvaluateOnce evaluates p once against the cluster c serves, with the controller's own
// evaluation, and returns the status the controller would write and OCM's one-line compliance
// message for it. Nothing is watched. An enforcing p writes through c, so a caller that must not
// change a cluster (regent dryrun) hands it a cluster of its own.
func EvaluateOnce(ctx context.Context, p *policyv1.ConfigurationPolicy, c client.Client, mapper meta.RESTMapper, now time.Time) (policyv1.ConfigurationPolicyStatus, string, error) {
	e := &evaluator{reader: c, namespaceReader: c, writer: c, mapper: mapper,
		watch: func(context.Context, types.NamespacedName, watchRef) error { return nil }}
	out, err := e.evaluate(ctx, p)
	if err != nil {
		return policyv1.ConfigurationPolicyStatus{}, "", err
	}
	st := buildStatus(p.Status, out, p.Generation, now)
	return st, compliancemessage.Of(st), nil
}
