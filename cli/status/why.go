package status

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/hub/propagator"
)

// pendingPrefix starts the message of a template held back by its dependencies (template sync on
// the managed cluster); what follows names each unmet dependency, separated by "; ".
const pendingPrefix = "Dependencies were not satisfied: "

// Why is everything the hub knows about one policy on one cluster.
type Why struct {
	Namespace string `json:"namespace"`
	Policy    string `json:"policy"`
	Cluster   string `json:"cluster"`
	// Placement lists each binding of the policy and whether its placement chose the cluster.
	Placement []PlacementReason `json:"placement"`
	Selected  bool              `json:"selected"`
	// Rollout is the cluster's line of the rollout; nil when no group holds it.
	Rollout *ClusterState `json:"rollout,omitempty"`
	Group   string        `json:"group,omitempty"`
	// Replica is the replicated policy in the cluster namespace; nil when there is none.
	Replica *ReplicaState `json:"replica,omitempty"`
	// Dependencies are the declared ones; Unmet those the managed cluster reports waiting for.
	Dependencies []string   `json:"dependencies,omitempty"`
	Unmet        []string   `json:"unmetDependencies,omitempty"`
	Templates    []Template `json:"templates,omitempty"`
	// Report is the summary of the cluster's rolled-up report for the policy.
	Report *Counts `json:"report,omitempty"`
}

// PlacementReason is one binding's answer for the cluster.
type PlacementReason struct {
	Binding   string `json:"binding"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	PolicySet string `json:"policySet,omitempty"`
	Chosen    bool   `json:"chosen"`
	// Group is the decision group that holds the cluster, when chosen.
	Group string `json:"group,omitempty"`
	// Detail is the placement's own word when it did not choose the cluster.
	Detail string `json:"detail,omitempty"`
}

// ReplicaState is what the replicated policy says.
type ReplicaState struct {
	Name                    string                   `json:"name"`
	RemediationAction       string                   `json:"remediationAction,omitempty"`
	Generation              int64                    `json:"generation"`
	LastEvaluatedGeneration int64                    `json:"lastEvaluatedGeneration,omitempty"`
	Compliance              policyv1.ComplianceState `json:"compliance,omitempty"`
}

// Template is one template's compliance and its latest message.
type Template struct {
	Kind       string                   `json:"kind,omitempty"`
	Name       string                   `json:"name"`
	Compliance policyv1.ComplianceState `json:"compliance,omitempty"`
	Message    string                   `json:"message,omitempty"`
}

// Counts are a report's result counts.
type Counts struct {
	Pass  int `json:"pass"`
	Fail  int `json:"fail"`
	Warn  int `json:"warn"`
	Error int `json:"error"`
	Skip  int `json:"skip"`
}

func (c *Counts) add(s openreportsv1alpha1.ReportSummary) {
	c.Pass, c.Fail, c.Warn, c.Error, c.Skip = c.Pass+s.Pass, c.Fail+s.Fail, c.Warn+s.Warn, c.Error+s.Error, c.Skip+s.Skip
}

// ReadWhy gathers, from the hub, why policy namespace/name is where it is on cluster.
func ReadWhy(ctx context.Context, c client.Reader, namespace, name, cluster string, now time.Time) (Why, error) {
	w := Why{Namespace: namespace, Policy: name, Cluster: cluster}
	root := &policyv1.Policy{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, root); err != nil {
		return w, fmt.Errorf("get policy %s/%s: %w", namespace, name, err)
	}
	for _, p := range root.Status.Placement {
		reason, err := placementReason(ctx, c, namespace, cluster, p)
		if err != nil {
			return w, err
		}
		w.Placement = append(w.Placement, reason)
	}
	r, err := readRolloutOf(ctx, c, root, now)
	if err != nil {
		return w, err
	}
	for _, g := range r.Groups {
		for i := range g.Clusters {
			if g.Clusters[i].Name == cluster && g.Index >= 0 {
				w.Selected, w.Rollout, w.Group = true, &g.Clusters[i], g.label()
			}
		}
	}
	for _, d := range root.Spec.Dependencies {
		w.Dependencies = append(w.Dependencies, dependencyName(d))
	}
	for _, t := range root.Spec.PolicyTemplates {
		for _, d := range t.ExtraDependencies {
			w.Dependencies = append(w.Dependencies, dependencyName(d)+" (extra)")
		}
	}

	replica := &policyv1.Policy{}
	err = c.Get(ctx, types.NamespacedName{Namespace: cluster, Name: propagator.ReplicaName(root)}, replica)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return w, fmt.Errorf("get replica %s/%s: %w", cluster, propagator.ReplicaName(root), err)
	default:
		w.Replica = &ReplicaState{Name: replica.Name, RemediationAction: string(replica.Spec.RemediationAction), Generation: replica.Generation,
			LastEvaluatedGeneration: replica.Status.LastEvaluatedGeneration, Compliance: replica.Status.ComplianceState}
		w.Templates = templatesOf(replica)
		w.Unmet = unmetOf(w.Templates)
	}

	report := &openreportsv1alpha1.Report{}
	err = c.Get(ctx, types.NamespacedName{Namespace: cluster, Name: propagator.ReplicaName(root)}, report)
	switch {
	case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
	case err != nil:
		return w, fmt.Errorf("get rolled-up report %s/%s: %w", cluster, propagator.ReplicaName(root), err)
	default:
		w.Report = &Counts{}
		w.Report.add(report.Summary)
	}
	return w, nil
}

// placementReason says whether the binding's placement chose cluster, from its decisions.
func placementReason(ctx context.Context, c client.Reader, namespace, cluster string, p *policyv1.Placement) (PlacementReason, error) {
	out := PlacementReason{Binding: p.PlacementBinding, PolicySet: p.PolicySet}
	if p.PlacementRule != "" {
		out.Kind, out.Name = "PlacementRule", p.PlacementRule
		groups, err := propagatorRuleDecisions(ctx, c, types.NamespacedName{Namespace: namespace, Name: p.PlacementRule})
		if err != nil {
			return out, err
		}
		out.Chosen = groups[cluster]
		if !out.Chosen {
			out.Detail = "not in the PlacementRule's status.decisions"
		}
		return out, nil
	}
	out.Kind, out.Name = "Placement", p.Placement
	decisions := &clusterv1beta1.PlacementDecisionList{}
	if err := c.List(ctx, decisions, client.InNamespace(namespace), client.MatchingLabels{clusterv1beta1.PlacementLabel: p.Placement}); err != nil {
		return out, fmt.Errorf("list decisions of placement %s/%s: %w", namespace, p.Placement, err)
	}
	for _, d := range decisions.Items {
		for _, cd := range d.Status.Decisions {
			if cd.ClusterName == cluster {
				out.Chosen = true
				out.Group = strings.TrimSpace(d.Labels[clusterv1beta1.DecisionGroupIndexLabel] + " " + d.Labels[clusterv1beta1.DecisionGroupNameLabel])
			}
		}
	}
	if out.Chosen {
		return out, nil
	}
	placement := &clusterv1beta1.Placement{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: p.Placement}, placement); err != nil {
		if apierrors.IsNotFound(err) {
			out.Detail = "the placement does not exist"
			return out, nil
		}
		return out, fmt.Errorf("get placement %s/%s: %w", namespace, p.Placement, err)
	}
	out.Detail = "not in the placement's decisions"
	if cond := meta.FindStatusCondition(placement.Status.Conditions, clusterv1beta1.PlacementConditionSatisfied); cond != nil {
		out.Detail += fmt.Sprintf("; %s: %s", cond.Reason, cond.Message)
	}
	return out, nil
}

func dependencyName(d policyv1.PolicyDependency) string {
	name := d.Name
	if d.Namespace != "" {
		name = d.Namespace + "/" + name
	}
	return fmt.Sprintf("%s %s must be %s", d.Kind, name, d.Compliance)
}

// templatesOf lists a replica's templates with their compliance and latest message; the kind comes
// from the template whose name matches.
func templatesOf(p *policyv1.Policy) []Template {
	kinds := map[string]string{}
	for _, t := range p.Spec.PolicyTemplates {
		if t == nil {
			continue
		}
		if obj, err := t.ObjectDefinition.MarshalJSON(); err == nil {
			kind, name := kindAndName(obj)
			kinds[name] = kind
		}
	}
	var out []Template
	for _, d := range p.Status.Details {
		if d == nil {
			continue
		}
		t := Template{Name: d.TemplateMeta.Name, Kind: kinds[d.TemplateMeta.Name], Compliance: d.ComplianceState}
		if len(d.History) > 0 {
			t.Message = d.History[0].Message
		}
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// unmetOf reads the unmet dependencies the managed cluster named in its Pending templates.
func unmetOf(ts []Template) []string {
	seen := map[string]bool{}
	var out []string
	for _, t := range ts {
		if t.Compliance != policyv1.Pending {
			continue
		}
		rest, ok := strings.CutPrefix(t.Message, pendingPrefix)
		if !ok {
			continue
		}
		for _, d := range strings.Split(rest, "; ") {
			if d = strings.TrimSpace(d); d != "" && !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
	}
	sort.Strings(out)
	return out
}

// kindAndName reads a template object's kind and metadata.name.
func kindAndName(raw []byte) (kind, name string) {
	var obj struct {
		Kind     string `json:"kind"`
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	if json.Unmarshal(raw, &obj) != nil {
		return "", ""
	}
	return obj.Kind, obj.Metadata.Name
}

var placementRuleGVK = schema.GroupVersionKind{Group: "apps.open-cluster-management.io", Version: "v1", Kind: "PlacementRule"}

// propagatorRuleDecisions reads the clusters of a PlacementRule's status.decisions, as the
// propagator takes them; a rule or kind that does not exist chooses none.
func propagatorRuleDecisions(ctx context.Context, c client.Reader, key types.NamespacedName) (map[string]bool, error) {
	rule := &unstructured.Unstructured{}
	rule.SetGroupVersionKind(placementRuleGVK)
	if err := c.Get(ctx, key, rule); err != nil {
		if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get placement rule %s: %w", key, err)
	}
	decisions, _, _ := unstructured.NestedSlice(rule.Object, "status", "decisions")
	out := map[string]bool{}
	for _, d := range decisions {
		if m, ok := d.(map[string]any); ok {
			if name, ok := m["clusterName"].(string); ok {
				out[name] = true
			}
		}
	}
	return out, nil
}
