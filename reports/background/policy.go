package background

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/reports"
)

// policy is one serving generation of a policy the scan evaluates.
type policy struct {
	ref reports.PolicyRef
	// server is the policy's name in the policy server (its URL path), generation the serving
	// one: the pair the evaluator loads.
	server     string
	generation int64
	// owner is the AdmissionPolicy, ClusterAdmissionPolicy or one of their group kinds, for events.
	owner kubewardenv1.PolicyReference
	// namespace confines an AdmissionPolicy to its own namespace; empty for a cluster-wide one.
	namespace string
	spec      kubewardenv1.PolicySpec
	nsSel     labels.Selector // nil: every namespace
	objSel    labels.Selector // nil: every object
	// class is what the policy's annotations say of its results now (they are not part of any
	// generation); invalidSeverity is its severity annotation when openreports does not know it.
	class           reports.Classification
	invalidSeverity string
	// annotated is the version of the policy's results: its serving generation and its
	// classification annotations, so a change of either makes them stale.
	annotated string
}

func (p *policy) version() string {
	if p.annotated == "" {
		return strconv.FormatInt(p.generation, 10)
	}
	return p.annotated
}

// classify sets the classification of p and its version from its policy's annotations.
func (p *policy) classify(annotations map[string]string) {
	p.class, p.invalidSeverity = reports.Classify(annotations, p.spec.Mode == kubewardenv1.ModeMonitor)
	p.annotated = reports.Version(strconv.FormatInt(p.generation, 10), annotations)
}

// scannedPolicies are the policies of revs the scan evaluates: enabled, serving (the generation
// the webhook calls) and with backgroundAudit. A revision whose data or selectors do not decode is
// reported in errs and left out.
func scannedPolicies(revs []kubewardenv1.PolicyRevision) (out map[policyID]*policy, errs []error) {
	out = map[policyID]*policy{}
	for i := range revs {
		r := &revs[i]
		if !r.Spec.Enabled || r.Labels[kubewardenv1.ServingLabel] != "true" {
			continue
		}
		spec, err := revisionSpec(r)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !spec.BackgroundAudit {
			continue
		}
		p := &policy{
			server: r.Spec.ObjectReference.ServerPolicyName(), generation: r.Spec.PolicyGeneration,
			owner: r.Spec.ObjectReference, spec: spec,
			ref: reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: r.Spec.ObjectReference.ReportedName()},
		}
		if k := r.Spec.ObjectReference.Kind; k == kubewardenv1.KindAdmissionPolicy || k == kubewardenv1.KindAdmissionPolicyGroup {
			p.ref.Scope, p.namespace = reportsv1alpha1.PolicyScopeNamespaced, r.Spec.ObjectReference.Namespace
		}
		if p.nsSel, err = selector(spec.NamespaceSelector); err == nil {
			p.objSel, err = selector(spec.ObjectSelector)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("revision %s: %w", r.Name, err))
			continue
		}
		id := idOf(p.ref, p.namespace)
		if old, ok := out[id]; ok && old.generation > p.generation {
			continue // two revisions labelled serving while the controller moves the label
		}
		out[id] = p
	}
	return out, errs
}

// revisionSpec is what the scan needs of a revision's data: a policy's spec, or for a group the
// fields it shares with one (the group is evaluated whole by the policy server under its own
// name, so its members and expression are not the scan's business).
func revisionSpec(r *kubewardenv1.PolicyRevision) (kubewardenv1.PolicySpec, error) {
	var spec kubewardenv1.PolicySpec
	if !kubewardenv1.IsGroupKind(r.Spec.ObjectReference.Kind) {
		if err := json.Unmarshal(r.Spec.Data.Raw, &spec); err != nil {
			return spec, fmt.Errorf("revision %s: data is not a policy spec: %w", r.Name, err)
		}
		return spec, nil
	}
	var g kubewardenv1.PolicyGroupSpec
	if err := json.Unmarshal(r.Spec.Data.Raw, &g); err != nil {
		return spec, fmt.Errorf("revision %s: data is not a policy group spec: %w", r.Name, err)
	}
	return groupAsPolicy(g), nil
}

// groupAsPolicy is the part of a group's spec a policy's spec also has, as a policy's spec.
func groupAsPolicy(g kubewardenv1.PolicyGroupSpec) kubewardenv1.PolicySpec {
	var spec kubewardenv1.PolicySpec
	spec.PolicyServer, spec.Mode, spec.Rules = g.PolicyServer, g.Mode, g.Rules
	spec.NamespaceSelector, spec.ObjectSelector = g.NamespaceSelector, g.ObjectSelector
	spec.BackgroundAudit = g.BackgroundAudit
	return spec
}

// policyID names a policy across namespaces: an AdmissionPolicy's report label holds only its
// name (the report's namespace says the rest), so two namespaces' policies of one name need the
// namespace here.
type policyID string

func idOf(ref reports.PolicyRef, namespace string) policyID {
	if ref.Scope == reportsv1alpha1.PolicyScopeNamespaced {
		return policyID("n/" + namespace + "/" + ref.Name)
	}
	return policyID("c/" + ref.Name)
}

func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return nil, nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

// scannedOperation tells whether a rule's operations include what the scan simulates: the
// object's creation.
func scannedOperation(ops []admissionregistrationv1.OperationType) bool {
	return slices.Contains(ops, admissionregistrationv1.Create) || slices.Contains(ops, admissionregistrationv1.OperationAll)
}

// resourceType is a listable kind as discovery names it.
type resourceType struct {
	gvr        schema.GroupVersionResource
	kind       string
	namespaced bool
}

// typesOf are the kinds p's rules name among the discovered ones, once per group and resource
// (the first version listed, discovery's preferred one, when a rule allows several: the objects
// are the same). Subresources are not objects and are never scanned, nor are the reports
// themselves.
func typesOf(p *policy, discovered []resourceType) []resourceType {
	var out []resourceType
	seen := map[schema.GroupResource]bool{}
	for _, rule := range p.spec.Rules {
		if !scannedOperation(rule.Operations) {
			continue
		}
		for _, t := range discovered {
			if seen[t.gvr.GroupResource()] || t.gvr.Group == reportsv1alpha1.GroupVersion.Group || !ruleMatches(rule.Rule, t) {
				continue
			}
			if p.namespace != "" && !t.namespaced {
				continue
			}
			seen[t.gvr.GroupResource()] = true
			out = append(out, t)
		}
	}
	return out
}

func ruleMatches(r admissionregistrationv1.Rule, t resourceType) bool {
	if r.Scope != nil {
		switch *r.Scope {
		case admissionregistrationv1.NamespacedScope:
			if !t.namespaced {
				return false
			}
		case admissionregistrationv1.ClusterScope:
			if t.namespaced {
				return false
			}
		}
	}
	return matchesOne(r.APIGroups, t.gvr.Group) && matchesOne(r.APIVersions, t.gvr.Version) &&
		(matchesOne(r.Resources, t.gvr.Resource) || slices.Contains(r.Resources, "*/*"))
}

func matchesOne(allowed []string, v string) bool {
	return slices.Contains(allowed, "*") || slices.Contains(allowed, v)
}

// matches tells whether p applies to an object of type t with objLabels in namespace ns, whose
// labels are nsLabels; the apiserver's webhook semantics: the namespace selector applies to a
// namespaced object's namespace and to a Namespace itself, and to no other cluster-scoped object.
func (p *policy) matches(t resourceType, ns string, objLabels, nsLabels map[string]string) bool {
	if p.namespace != "" && ns != p.namespace {
		return false
	}
	if p.nsSel != nil {
		switch {
		case t.namespaced:
			if !p.nsSel.Matches(labels.Set(nsLabels)) {
				return false
			}
		case t.gvr.Group == "" && t.gvr.Resource == "namespaces":
			if !p.nsSel.Matches(labels.Set(objLabels)) {
				return false
			}
		}
	}
	return p.objSel == nil || p.objSel.Matches(labels.Set(objLabels))
}
