package propagator

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// CachedReplica is what the hub's replica cache holds of a replica, once TrimReplica and
// CompactReplica have run: the fields of a trimmed replica that can be set, in 168 bytes where a
// Policy takes 512 (its size class). A hub caches one replica per cluster and root, 150,000 on
// a large fleet, and the Policy struct was the largest thing it held (77 MB of a 170 MB heap).
// What is rarely set (a deletion, written conditions, an admission policy's serving details)
// sits behind one pointer.
//
// It is a client.Object so that an informer can key, index and hand it to event handlers; it is
// read-only like everything in a cache, and a setter of a field it does not hold does nothing.
type CachedReplica struct {
	name, namespace, specHash, resourceVersion string
	uid                                        types.UID
	generation, lastEvaluatedGeneration        int64
	labels, annotations                        map[string]string
	remediation                                policyv1.RemediationAction
	compliance                                 policyv1.ComplianceState
	rolloutStatus                              policyv1.RolloutStatus
	rare                                       *rareReplicaFields
}

type rareReplicaFields struct {
	deletionTimestamp *metav1.Time
	conditions        []metav1.Condition
	details           []*policyv1.DetailsPerTemplate
}

// NewCachedReplica records p, a replica the cache transform already trimmed and compacted. It
// shares p's maps, slices and strings.
func NewCachedReplica(p *policyv1.Policy) *CachedReplica {
	c := &CachedReplica{name: p.Name, namespace: p.Namespace, specHash: p.GenerateName, resourceVersion: p.ResourceVersion,
		uid: p.UID, generation: p.Generation, lastEvaluatedGeneration: p.Status.LastEvaluatedGeneration,
		labels: p.Labels, annotations: p.Annotations, remediation: p.Spec.RemediationAction,
		compliance: p.Status.ComplianceState, rolloutStatus: p.Status.RolloutStatus}
	if p.DeletionTimestamp != nil || len(p.Status.Conditions) > 0 || len(p.Status.Details) > 0 {
		c.rare = &rareReplicaFields{deletionTimestamp: p.DeletionTimestamp, conditions: p.Status.Conditions, details: p.Status.Details}
	}
	return c
}

// Policy returns the replica as the trimmed Policy it was recorded from, sharing its maps and
// slices: to be read only.
func (c *CachedReplica) Policy() *policyv1.Policy {
	p := &policyv1.Policy{}
	p.Name, p.Namespace, p.GenerateName, p.ResourceVersion = c.name, c.namespace, c.specHash, c.resourceVersion
	p.UID, p.Generation, p.Labels, p.Annotations = c.uid, c.generation, c.labels, c.annotations
	p.Spec.RemediationAction = c.remediation
	p.Status = c.status()
	if c.rare != nil {
		p.DeletionTimestamp = c.rare.deletionTimestamp
	}
	return p
}

// status is the replica's status as the trimmed Policy had it.
func (c *CachedReplica) status() policyv1.PolicyStatus {
	s := policyv1.PolicyStatus{ComplianceState: c.compliance, RolloutStatus: c.rolloutStatus, LastEvaluatedGeneration: c.lastEvaluatedGeneration}
	if c.rare != nil {
		s.Conditions, s.Details = c.rare.conditions, c.rare.details
	}
	return s
}

func (c *CachedReplica) conditions() []metav1.Condition {
	if c.rare == nil {
		return nil
	}
	return c.rare.conditions
}

// enforces says whether the replica enforces, read as enforces reads a trimmed replica's spec.
func (c *CachedReplica) enforces() bool {
	return enforces(&policyv1.PolicySpec{RemediationAction: c.remediation})
}

// recordOf is the CachedReplica of a replica read other than through the hub's replica cache,
// trimmed as that cache trims it; p is left as it is.
func recordOf(p *policyv1.Policy) *CachedReplica {
	trimmed := *p
	TrimReplica(&trimmed)
	return NewCachedReplica(&trimmed)
}

// Compliance is the replica's status.compliant.
func (c *CachedReplica) Compliance() policyv1.ComplianceState { return c.compliance }

// HasDetails says whether the replica kept status details (an admission policy's serving
// generation, see the hub's cache transform).
func (c *CachedReplica) HasDetails() bool { return c.rare != nil && len(c.rare.details) > 0 }
