package status

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	policyv1 "regent.dev/regent/api/policy/v1"
)

// Spoke is what a managed cluster runs: its policies and their templates, the admission policies
// and how far each is served, and its reports.
type Spoke struct {
	Policies  []SpokePolicy     `json:"policies"`
	Admission []AdmissionPolicy `json:"admissionPolicies"`
	Reports   ReportCounts      `json:"reports"`
}

// SpokePolicy is one policy on the managed cluster.
type SpokePolicy struct {
	Namespace         string                   `json:"namespace"`
	Name              string                   `json:"name"`
	RemediationAction string                   `json:"remediationAction,omitempty"`
	Compliance        policyv1.ComplianceState `json:"compliance,omitempty"`
	Templates         []Template               `json:"templates,omitempty"`
	// Pending names each dependency a template waits for.
	Pending []string `json:"pendingDependencies,omitempty"`
}

// AdmissionPolicy is one (Cluster)AdmissionPolicy: the generation the webhook serves against the
// newest, and each policy-server replica's readiness on the newest.
type AdmissionPolicy struct {
	Kind         string                       `json:"kind"`
	Namespace    string                       `json:"namespace,omitempty"`
	Name         string                       `json:"name"`
	PolicyServer string                       `json:"policyServer,omitempty"`
	Mode         string                       `json:"mode,omitempty"`
	Generation   int64                        `json:"generation"`
	Serving      int64                        `json:"servingGeneration"`
	Phase        string                       `json:"phase,omitempty"`
	Active       metav1.ConditionStatus       `json:"policyActive,omitempty"`
	Replicas     []kubewardenv1.ReplicaStatus `json:"replicas,omitempty"`
}

// ReportCounts are the namespace Reports and ClusterReports of the cluster, summed.
type ReportCounts struct {
	Reports int `json:"reports"`
	Counts
}

// ReadSpoke reads the managed cluster c points at.
func ReadSpoke(ctx context.Context, c client.Reader) (Spoke, error) {
	var s Spoke
	policies := &policyv1.PolicyList{}
	if err := c.List(ctx, policies); err != nil {
		return s, fmt.Errorf("list policies: %w", err)
	}
	for i := range policies.Items {
		p := &policies.Items[i]
		sp := SpokePolicy{Namespace: p.Namespace, Name: p.Name, RemediationAction: string(p.Spec.RemediationAction),
			Compliance: p.Status.ComplianceState, Templates: templatesOf(p)}
		sp.Pending = unmetOf(sp.Templates)
		s.Policies = append(s.Policies, sp)
	}

	caps := &kubewardenv1.ClusterAdmissionPolicyList{}
	if err := listIfServed(ctx, c, caps); err != nil {
		return s, err
	}
	for i := range caps.Items {
		p := &caps.Items[i]
		s.Admission = append(s.Admission, admissionOf("ClusterAdmissionPolicy", &p.ObjectMeta, p.Spec.PolicyServer, string(p.Spec.Mode), p.Status))
	}
	aps := &kubewardenv1.AdmissionPolicyList{}
	if err := listIfServed(ctx, c, aps); err != nil {
		return s, err
	}
	for i := range aps.Items {
		p := &aps.Items[i]
		s.Admission = append(s.Admission, admissionOf("AdmissionPolicy", &p.ObjectMeta, p.Spec.PolicyServer, string(p.Spec.Mode), p.Status))
	}

	capgs := &kubewardenv1.ClusterAdmissionPolicyGroupList{}
	if err := listIfServed(ctx, c, capgs); err != nil {
		return s, err
	}
	for i := range capgs.Items {
		p := &capgs.Items[i]
		s.Admission = append(s.Admission, admissionOf("ClusterAdmissionPolicyGroup", &p.ObjectMeta, p.Spec.PolicyServer, string(p.Spec.Mode), p.Status))
	}
	apgs := &kubewardenv1.AdmissionPolicyGroupList{}
	if err := listIfServed(ctx, c, apgs); err != nil {
		return s, err
	}
	for i := range apgs.Items {
		p := &apgs.Items[i]
		s.Admission = append(s.Admission, admissionOf("AdmissionPolicyGroup", &p.ObjectMeta, p.Spec.PolicyServer, string(p.Spec.Mode), p.Status))
	}

	reports := &openreportsv1alpha1.ReportList{}
	if err := listIfServed(ctx, c, reports); err != nil {
		return s, err
	}
	for _, r := range reports.Items {
		s.Reports.Reports++
		s.Reports.add(r.Summary)
	}
	clusterReports := &openreportsv1alpha1.ClusterReportList{}
	if err := listIfServed(ctx, c, clusterReports); err != nil {
		return s, err
	}
	for _, r := range clusterReports.Items {
		s.Reports.Reports++
		s.Reports.add(r.Summary)
	}
	return s, nil
}

// listIfServed lists, treating a kind the cluster does not serve as empty: a cluster without the
// admission or report CRDs simply has none.
func listIfServed(ctx context.Context, c client.Reader, list client.ObjectList) error {
	if err := c.List(ctx, list); err != nil && !meta.IsNoMatchError(err) {
		return fmt.Errorf("list %T: %w", list, err)
	}
	return nil
}

func admissionOf(kind string, m *metav1.ObjectMeta, server, mode string, st kubewardenv1.PolicyStatus) AdmissionPolicy {
	a := AdmissionPolicy{Kind: kind, Namespace: m.Namespace, Name: m.Name, PolicyServer: server, Mode: mode,
		Generation: m.Generation, Serving: st.ServingGeneration, Phase: string(st.Phase), Replicas: st.Replicas}
	if c := meta.FindStatusCondition(st.Conditions, kubewardenv1.ConditionPolicyActive); c != nil {
		a.Active = c.Status
	}
	sort.Slice(a.Replicas, func(i, j int) bool { return a.Replicas[i].Replica < a.Replicas[j].Replica })
	return a
}

// WriteTable prints the cluster in three tables.
func (s Spoke) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 8, 3, ' ', 0)
	fmt.Fprintln(tw, "POLICY\tREMEDIATION\tCOMPLIANCE\tTEMPLATES\tPENDING ON")
	if len(s.Policies) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t\t")
	}
	for _, p := range s.Policies {
		var ts []string
		for _, t := range p.Templates {
			ts = append(ts, t.Name+"="+or(string(t.Compliance), "-"))
		}
		fmt.Fprintf(tw, "%s/%s\t%s\t%s\t%s\t%s\n", p.Namespace, p.Name, or(p.RemediationAction, "-"), or(string(p.Compliance), "-"),
			or(strings.Join(ts, ","), "-"), or(strings.Join(p.Pending, "; "), "-"))
	}
	fmt.Fprintln(tw)
	fmt.Fprintln(tw, "ADMISSION POLICY\tSERVER\tMODE\tGENERATION\tSERVING\tACTIVE\tREPLICAS READY")
	if len(s.Admission) == 0 {
		fmt.Fprintln(tw, "(none)\t\t\t\t\t\t")
	}
	for _, a := range s.Admission {
		name := a.Name
		if a.Namespace != "" {
			name = a.Namespace + "/" + name
		}
		fmt.Fprintf(tw, "%s %s\t%s\t%s\t%d\t%d\t%s\t%s\n", a.Kind, name, or(a.PolicyServer, "-"), or(a.Mode, "-"), a.Generation, a.Serving,
			or(string(a.Active), "-"), replicasLine(a.Replicas))
	}
	fmt.Fprintln(tw)
	fmt.Fprintf(tw, "REPORTS\tPASS\tFAIL\tWARN\tERROR\tSKIP\n")
	fmt.Fprintf(tw, "%d\t%d\t%d\t%d\t%d\t%d\n", s.Reports.Reports, s.Reports.Pass, s.Reports.Fail, s.Reports.Warn, s.Reports.Error, s.Reports.Skip)
	return tw.Flush()
}

// replicasLine is "ready/total" then each replica: "2/3 (0:True@5 1:True@5 2:False@5)".
func replicasLine(rs []kubewardenv1.ReplicaStatus) string {
	if len(rs) == 0 {
		return "-"
	}
	ready := 0
	parts := make([]string, 0, len(rs))
	for _, r := range rs {
		if r.Ready == metav1.ConditionTrue {
			ready++
		}
		parts = append(parts, fmt.Sprintf("%d:%s@%d", r.Replica, r.Ready, r.PolicyGeneration))
	}
	return fmt.Sprintf("%d/%d (%s)", ready, len(rs), strings.Join(parts, " "))
}
