package dryrun

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/spoke-addon/configpolicy"
)

// Action is what enforcing the policy would do to an object.
type Action string

const (
	ActionCreate Action = "create"
	ActionUpdate Action = "update"
	ActionDelete Action = "delete"
)

// Change is one write enforcing the policy would make.
type Change struct {
	Action     Action `json:"action"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
	// Diff is the unified diff of the object's YAML (from nothing for a create, to nothing for
	// a delete).
	Diff string `json:"diff"`
}

// Result is what the policy reports and would change.
type Result struct {
	// Status is the status the controller would write when informing.
	Status policyv1.ConfigurationPolicyStatus `json:"status"`
	// Message is OCM's compliance message ("NonCompliant; violation - ...").
	Message string `json:"message"`
	// Changes are the writes enforcing would make, in order.
	Changes []Change `json:"changes"`
}

// Compliant reports whether the policy would be Compliant.
func (r Result) Compliant() bool { return r.Status.ComplianceState == policyv1.Compliant }

// Run evaluates p against objects: once informing, for what it reports, once enforcing on a
// fresh copy, for what it would change.
func Run(ctx context.Context, p *policyv1.ConfigurationPolicy, objects []*unstructured.Unstructured, now time.Time) (Result, error) {
	mapper := restMapper(objects)
	inform := p.DeepCopy()
	inform.Spec.RemediationAction = policyv1.Inform
	c, err := newCluster(ctx, mapper, objects)
	if err != nil {
		return Result{}, err
	}
	var r Result
	if r.Status, r.Message, err = configpolicy.EvaluateOnce(ctx, inform, c, mapper, now); err != nil {
		return Result{}, fmt.Errorf("evaluate: %w", err)
	}
	enforce := p.DeepCopy()
	enforce.Spec.RemediationAction = policyv1.Enforce
	c, err = newCluster(ctx, mapper, objects)
	if err != nil {
		return Result{}, err
	}
	rec := &recorder{WithWatch: c}
	if _, _, err := configpolicy.EvaluateOnce(ctx, enforce, rec, mapper, now); err != nil {
		return Result{}, fmt.Errorf("evaluate as enforce: %w", err)
	}
	r.Changes = rec.changes
	return r, nil
}
