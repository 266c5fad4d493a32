package dashboard

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/api/meta"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// Labels the model reads; they are OCM's (replicas, decisions) and the report roll-up's.
const (
	rootPolicyLabel = "policy.open-cluster-management.io/root-policy"
	rolledUpByLabel = "reports.regent.dev/rolled-up-by"
	rolledUpBy      = "regent-reports-rollup"
	rolloutCondType = "Rollout"
)

// Inputs are the objects the model is built from, as the hub's cache holds them.
type Inputs struct {
	Policies  []policyv1.Policy
	Decisions []clusterv1beta1.PlacementDecision
	Reports   []openreportsv1alpha1.Report
	Now       time.Time
}

// Model is the whole fleet as the dashboard sees it; views are slices of it.
type Model struct {
	Built time.Time
	// Ticking is true when some text counts down (a deadline, a soak time): the board then
	// rebuilds now and then with no change to watch.
	Ticking  bool
	Policies []*PolicyModel
	Clusters []*ClusterModel
	clusters map[string]*ClusterModel
}

// PolicyModel is one root policy: its rollout and the compliance of each cluster it selects.
type PolicyModel struct {
	Key      string
	Rollout  string
	Strategy string
	// Waiting is the rollout condition's message: what the rollout as a whole waits for.
	Waiting string
	Groups  []*GroupModel
	Cells   map[string]*Cell
	Counts  map[string]int
}

// GroupModel is one decision group of a policy's placements.
type GroupModel struct {
	Name   string
	Index  int32
	State  string
	Counts map[string]int
	Total  int
	// Waiting says what the group waits for, in words.
	Waiting  string
	clusters []string
}

// Cell is one cluster of one policy.
type Cell struct {
	Cluster    string `json:"cluster"`
	Group      string `json:"group,omitempty"`
	Rollout    string `json:"rollout"`
	Compliance string `json:"compliance"`
	// Waits says what this cluster waits for (its turn, a report, the soak time).
	Waits      string `json:"waits,omitempty"`
	Violations *int64 `json:"violations,omitempty"`
}

// ClusterModel is one managed cluster across policies.
type ClusterModel struct {
	Name         string           `json:"name"`
	Compliant    int              `json:"compliant"`
	NonCompliant int              `json:"noncompliant"`
	Pending      int              `json:"pending"`
	Failing      bool             `json:"failing"`
	Reports      ReportCounts     `json:"reports"`
	Admission    []AdmissionModel `json:"admission,omitempty"`
}

// ReportCounts are a cluster's rolled-up report results, summed over its policies.
type ReportCounts struct {
	Pass  int `json:"pass"`
	Fail  int `json:"fail"`
	Warn  int `json:"warn"`
	Error int `json:"error"`
	Skip  int `json:"skip"`
}

// AdmissionModel is what the hub knows of one admission policy template on a cluster: the
// generation its policy server serves next to the newest one.
type AdmissionModel struct {
	Policy  string `json:"policy"`
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Phase   string `json:"phase"`
	Serving int64  `json:"serving"`
	Newest  int64  `json:"newest"`
}

// Rollout statuses, as the root policy spells them, plus the compliance values shown.
const (
	stateDone    = "done"
	stateActive  = "active"
	stateWaiting = "waiting"
	stateFailed  = "failed"
	noGroup      = "(no group)"
)

// Build turns the cache's objects into the model.
func Build(in Inputs) *Model {
	m := &Model{Built: in.Now, clusters: map[string]*ClusterModel{}}
	groupsOf := decisionGroups(in.Decisions)
	for i := range in.Policies {
		p := &in.Policies[i]
		if root, ok := p.Labels[rootPolicyLabel]; ok {
			m.addAdmission(root, p)
			continue
		}
		pm, ticking := buildPolicy(p, groupsOf, in.Now)
		m.Policies = append(m.Policies, pm)
		m.Ticking = m.Ticking || ticking
	}
	for _, p := range m.Policies {
		for _, c := range p.Cells {
			cm := m.cluster(c.Cluster)
			switch c.Compliance {
			case string(policyv1.Compliant):
				cm.Compliant++
			case string(policyv1.NonCompliant):
				cm.NonCompliant++
			default:
				cm.Pending++
			}
			if failing(c) {
				cm.Failing = true
			}
		}
	}
	for i := range in.Reports {
		r := &in.Reports[i]
		if r.Labels[rolledUpByLabel] != rolledUpBy {
			continue
		}
		c := m.cluster(r.Namespace)
		c.Reports.Pass += r.Summary.Pass
		c.Reports.Fail += r.Summary.Fail
		c.Reports.Warn += r.Summary.Warn
		c.Reports.Error += r.Summary.Error
		c.Reports.Skip += r.Summary.Skip
	}
	sort.Slice(m.Policies, func(i, j int) bool { return m.Policies[i].Key < m.Policies[j].Key })
	for _, c := range m.clusters {
		sort.Slice(c.Admission, func(i, j int) bool {
			a, b := c.Admission[i], c.Admission[j]
			return a.Policy+"/"+a.Name < b.Policy+"/"+b.Name
		})
		m.Clusters = append(m.Clusters, c)
	}
	sort.Slice(m.Clusters, func(i, j int) bool { return m.Clusters[i].Name < m.Clusters[j].Name })
	return m
}

func failing(c *Cell) bool {
	return c.Rollout == string(policyv1.RolloutFailed) || c.Rollout == string(policyv1.RolloutTimeOut) ||
		c.Compliance == string(policyv1.NonCompliant)
}

func (m *Model) cluster(name string) *ClusterModel {
	c, ok := m.clusters[name]
	if !ok {
		c = &ClusterModel{Name: name}
		m.clusters[name] = c
	}
	return c
}

// addAdmission records the serving generation a replica's admission-policy templates report.
func (m *Model) addAdmission(root string, replica *policyv1.Policy) {
	for _, d := range replica.Status.Details {
		if d == nil || len(d.History) == 0 {
			continue
		}
		a, ok := ParseServing(d.History[0].Message)
		if !ok {
			continue
		}
		a.Policy = root
		c := m.cluster(replica.Namespace)
		c.Admission = append(c.Admission, a)
	}
}

// ParseServing reads the spoke's admission-policy compliance message ("[<state>; ]<Kind> <name>
// is <phase>, serving generation <n> of <m>; …", written by templatesync) into its parts.
func ParseServing(msg string) (AdmissionModel, bool) {
	for _, part := range strings.Split(msg, "; ") {
		head, gens, ok := strings.Cut(part, ", serving generation ")
		if !ok {
			continue
		}
		words := strings.Fields(head)
		if len(words) != 4 || words[2] != "is" {
			continue
		}
		serving, newest, ok := strings.Cut(gens, " of ")
		if !ok {
			continue
		}
		s, err1 := strconv.ParseInt(serving, 10, 64)
		n, err2 := strconv.ParseInt(newest, 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		return AdmissionModel{Kind: words[0], Name: words[1], Phase: words[3], Serving: s, Newest: n}, true
	}
	return AdmissionModel{}, false
}

// groupKey identifies a decision group within a namespace's Placement.
type groupKey struct{ namespace, placement string }

type decisionGroup struct {
	name  string
	index int32
}

// decisionGroups maps each Placement's clusters to their decision group, as the placement
// controller labels its PlacementDecisions.
func decisionGroups(decisions []clusterv1beta1.PlacementDecision) map[groupKey]map[string]decisionGroup {
	out := map[groupKey]map[string]decisionGroup{}
	for i := range decisions {
		d := &decisions[i]
		k := groupKey{d.Namespace, d.Labels[clusterv1beta1.PlacementLabel]}
		if k.placement == "" {
			continue
		}
		idx, _ := strconv.ParseInt(d.Labels[clusterv1beta1.DecisionGroupIndexLabel], 10, 32)
		g := decisionGroup{name: d.Labels[clusterv1beta1.DecisionGroupNameLabel], index: int32(idx)}
		if out[k] == nil {
			out[k] = map[string]decisionGroup{}
		}
		for _, c := range d.Status.Decisions {
			out[k][c.ClusterName] = g
		}
	}
	return out
}

func buildPolicy(p *policyv1.Policy, groupsOf map[groupKey]map[string]decisionGroup, now time.Time) (pm *PolicyModel, ticking bool) {
	pm = &PolicyModel{
		Key:      p.Namespace + "/" + p.Name,
		Rollout:  string(p.Status.RolloutStatus),
		Strategy: strategyName(p.Spec.RolloutStrategy),
		Cells:    map[string]*Cell{},
		Counts:   map[string]int{},
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, rolloutCondType); c != nil {
		pm.Waiting = c.Message
	}
	// A cluster's group comes from the decisions of the Placements the root is placed through.
	clusterGroup := map[string]decisionGroup{}
	for _, pl := range p.Status.Placement {
		if pl == nil || pl.Placement == "" {
			continue
		}
		for c, g := range groupsOf[groupKey{p.Namespace, pl.Placement}] {
			clusterGroup[c] = g
		}
	}
	cfg := rolloutConfig(p.Spec.RolloutStrategy)
	groups := map[decisionGroup]*GroupModel{}
	for _, s := range p.Status.Status {
		if s == nil || s.ClusterName == "" {
			continue
		}
		g, ok := clusterGroup[s.ClusterName]
		if !ok {
			g = decisionGroup{name: noGroup, index: -1}
		}
		gm := groups[g]
		if gm == nil {
			gm = &GroupModel{Name: g.name, Index: g.index, Counts: map[string]int{}}
			if gm.Name == "" {
				gm.Name = fmt.Sprintf("group %d", g.index)
			}
			groups[g] = gm
		}
		status := string(s.RolloutStatus)
		if status == "" {
			status = string(policyv1.RolloutToApply)
		}
		compliance := string(s.ComplianceState)
		if compliance == "" {
			compliance = "Pending"
		}
		waits, counting := clusterWaits(s, cfg, now)
		ticking = ticking || counting
		cell := &Cell{Cluster: s.ClusterName, Group: gm.Name, Rollout: status, Compliance: compliance, Waits: waits}
		if s.Violations != nil {
			// A copy: the model outlives the cache's object, which it reads without copying.
			n := *s.Violations
			cell.Violations = &n
		}
		pm.Cells[s.ClusterName] = cell
		pm.Counts[status]++
		gm.Counts[status]++
		gm.Total++
		gm.clusters = append(gm.clusters, s.ClusterName)
	}
	for _, gm := range groups {
		sort.Strings(gm.clusters)
		pm.Groups = append(pm.Groups, gm)
	}
	sort.Slice(pm.Groups, func(i, j int) bool {
		if pm.Groups[i].Index != pm.Groups[j].Index {
			// The clusters without a group go last.
			if pm.Groups[i].Index < 0 || pm.Groups[j].Index < 0 {
				return pm.Groups[j].Index < 0
			}
			return pm.Groups[i].Index < pm.Groups[j].Index
		}
		return pm.Groups[i].Name < pm.Groups[j].Name
	})
	for _, gm := range pm.Groups {
		gm.State, gm.Waiting = groupState(gm)
	}
	return pm, ticking
}

// groupState names where a group stands: done when every cluster succeeded, failed when one
// failed or timed out, active while some are being enforced, waiting while all wait their turn.
func groupState(g *GroupModel) (state, waiting string) {
	bad := g.Counts[string(policyv1.RolloutFailed)] + g.Counts[string(policyv1.RolloutTimeOut)]
	switch {
	case bad > 0:
		return stateFailed, fmt.Sprintf("%d of %d clusters failed or timed out", bad, g.Total)
	case g.Counts[string(policyv1.RolloutSucceeded)] == g.Total:
		return stateDone, ""
	case g.Counts[string(policyv1.RolloutToApply)] == g.Total:
		return stateWaiting, "waits for its turn: earlier groups first"
	default:
		return stateActive, fmt.Sprintf("waits for %d of %d clusters to succeed", g.Total-g.Counts[string(policyv1.RolloutSucceeded)], g.Total)
	}
}

func strategyName(s *clusterv1alpha1.RolloutStrategy) string {
	if s == nil || s.Type == "" {
		return string(clusterv1alpha1.All)
	}
	return string(s.Type)
}

func rolloutConfig(s *clusterv1alpha1.RolloutStrategy) clusterv1alpha1.RolloutConfig {
	switch {
	case s == nil:
	case s.Type == clusterv1alpha1.Progressive && s.Progressive != nil:
		return s.Progressive.RolloutConfig
	case s.Type == clusterv1alpha1.ProgressivePerGroup && s.ProgressivePerGroup != nil:
		return s.ProgressivePerGroup.RolloutConfig
	case s.All != nil:
		return s.All.RolloutConfig
	}
	return clusterv1alpha1.RolloutConfig{}
}

// clusterWaits says what one cluster waits for: its turn, a compliance report (with the time left
// before the progress deadline), or the end of its soak time; counting is true when the text
// depends on now.
func clusterWaits(s *policyv1.CompliancePerClusterStatus, cfg clusterv1alpha1.RolloutConfig, now time.Time) (waits string, counting bool) {
	since := time.Time{}
	if s.LastTransitionTime != nil {
		since = s.LastTransitionTime.Time
	}
	switch s.RolloutStatus {
	case policyv1.RolloutToApply, "":
		return "its turn to be enforced", false
	case policyv1.RolloutProgressing:
		w := "a compliance report at the current generation"
		if d, err := time.ParseDuration(cfg.ProgressDeadline); err == nil && !since.IsZero() {
			until := since.Add(d)
			return w + fmt.Sprintf("; deadline in %s", left(until, now)), now.Before(until)
		}
		return w, false
	case policyv1.RolloutSucceeded:
		if soak := cfg.MinSuccessTime.Duration; soak > 0 && !since.IsZero() && now.Before(since.Add(soak)) {
			return fmt.Sprintf("soak time: %s left", left(since.Add(soak), now)), true
		}
		return "", false
	case policyv1.RolloutFailed:
		return "NonCompliant at the current generation: counts against the failure budget", false
	case policyv1.RolloutTimeOut:
		return "no report within the progress deadline: counts against the failure budget", false
	}
	return "", false
}

func left(until, now time.Time) time.Duration {
	d := until.Sub(now)
	if d < 0 {
		return 0
	}
	return d.Truncate(time.Second)
}
