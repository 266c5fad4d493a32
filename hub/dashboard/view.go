package dashboard

import (
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Page sizes: a laptop screen shows about this many cells, rows and columns at once.
const (
	clustersPerPage = 50
	policiesPerPage = 20
	cellsPerGroup   = 100
)

// Query is what a page asks to see: one rollout in detail, a page of policies and a page of
// clusters, the clusters narrowed by a name filter and optionally to failing ones.
type Query struct {
	Policy      string
	Filter      string
	OnlyFailing bool
	Page        int
	PolicyPage  int
}

// ParseQuery reads a Query from URL parameters (policy, q, failing, page, ppage); a bad number
// is page 0.
func ParseQuery(v url.Values) Query {
	atoi := func(s string) int {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0
		}
		return n
	}
	return Query{
		Policy:      v.Get("policy"),
		Filter:      strings.TrimSpace(v.Get("q")),
		OnlyFailing: v.Get("failing") == "1",
		Page:        atoi(v.Get("page")),
		PolicyPage:  atoi(v.Get("ppage")),
	}
}

// View is what one page shows; it is sent as JSON.
type View struct {
	Built    time.Time            `json:"built"`
	Totals   Totals               `json:"totals"`
	Rollouts Paged[Rollup]        `json:"rollouts"`
	Selected *Detail              `json:"selected,omitempty"`
	Heat     Heat                 `json:"heat"`
	Clusters Paged[*ClusterModel] `json:"clusters"`
}

// Totals are fleet-wide counts, independent of the filter.
type Totals struct {
	Policies int `json:"policies"`
	Clusters int `json:"clusters"`
	Failing  int `json:"failing"`
}

// Paged is one page of a longer list.
type Paged[T any] struct {
	Page  int `json:"page"`
	Pages int `json:"pages"`
	Total int `json:"total"`
	Items []T `json:"items"`
}

// Rollup is one root policy's line: its rollout status and counts per status.
type Rollup struct {
	Key      string         `json:"key"`
	Rollout  string         `json:"rollout"`
	Strategy string         `json:"strategy"`
	Waiting  string         `json:"waiting,omitempty"`
	Counts   map[string]int `json:"counts"`
	Total    int            `json:"total"`
}

// Detail is the selected rollout, group by group: counts for every group, cells for the
// clusters that pass the filter (at most cellsPerGroup per group, the rest counted in More).
type Detail struct {
	Rollup
	Groups []GroupView `json:"groups"`
}

// GroupView is one decision group of the selected rollout.
type GroupView struct {
	Name    string         `json:"name"`
	Index   int32          `json:"index"`
	State   string         `json:"state"`
	Waiting string         `json:"waiting,omitempty"`
	Counts  map[string]int `json:"counts"`
	Total   int            `json:"total"`
	Cells   []*Cell        `json:"cells"`
	More    int            `json:"more"`
}

// Heat is compliance per policy (rows, the policies page) and cluster (columns, the clusters
// page); each row also counts compliance over all its clusters.
type Heat struct {
	Clusters []string  `json:"clusters"`
	Rows     []HeatRow `json:"rows"`
}

// HeatRow is one policy's row of the heat map.
type HeatRow struct {
	Policy string         `json:"policy"`
	Counts map[string]int `json:"counts"`
	// Cells holds a compliance per column, "" where the policy does not select the cluster.
	Cells []string `json:"cells"`
}

// View slices the model for q.
func (m *Model) View(q Query) View {
	v := View{Built: m.Built, Totals: Totals{Policies: len(m.Policies), Clusters: len(m.Clusters)}}
	for _, c := range m.Clusters {
		if c.Failing {
			v.Totals.Failing++
		}
	}
	var rollups []Rollup
	for _, p := range m.Policies {
		rollups = append(rollups, rollupOf(p))
	}
	v.Rollouts = page(rollups, q.PolicyPage, policiesPerPage)

	var clusters []*ClusterModel
	for _, c := range m.Clusters {
		if q.matches(c.Name) && (!q.OnlyFailing || c.Failing) {
			clusters = append(clusters, c)
		}
	}
	v.Clusters = page(clusters, q.Page, clustersPerPage)

	for _, c := range v.Clusters.Items {
		v.Heat.Clusters = append(v.Heat.Clusters, c.Name)
	}
	for _, r := range v.Rollouts.Items {
		p := m.policy(r.Key)
		row := HeatRow{Policy: p.Key, Counts: map[string]int{}, Cells: make([]string, len(v.Heat.Clusters))}
		for _, c := range p.Cells {
			row.Counts[c.Compliance]++
		}
		for i, name := range v.Heat.Clusters {
			if c, ok := p.Cells[name]; ok {
				row.Cells[i] = c.Compliance
			}
		}
		v.Heat.Rows = append(v.Heat.Rows, row)
	}

	selected := m.policy(q.Policy)
	if selected == nil && len(m.Policies) > 0 {
		selected = m.Policies[0]
	}
	if selected != nil {
		v.Selected = m.detail(selected, q)
	}
	return v
}

func (m *Model) policy(key string) *PolicyModel {
	for _, p := range m.Policies {
		if p.Key == key {
			return p
		}
	}
	return nil
}

func (m *Model) detail(p *PolicyModel, q Query) *Detail {
	d := &Detail{Rollup: rollupOf(p)}
	for _, g := range p.Groups {
		gv := GroupView{Name: g.Name, Index: g.Index, State: g.State, Waiting: g.Waiting, Counts: g.Counts, Total: g.Total, Cells: []*Cell{}}
		for _, name := range g.clusters {
			c := p.Cells[name]
			if !q.matches(name) || (q.OnlyFailing && !failing(c)) {
				continue
			}
			if len(gv.Cells) == cellsPerGroup {
				gv.More++
				continue
			}
			gv.Cells = append(gv.Cells, c)
		}
		d.Groups = append(d.Groups, gv)
	}
	return d
}

func rollupOf(p *PolicyModel) Rollup {
	return Rollup{Key: p.Key, Rollout: p.Rollout, Strategy: p.Strategy, Waiting: p.Waiting, Counts: p.Counts, Total: len(p.Cells)}
}

func (q Query) matches(cluster string) bool {
	return q.Filter == "" || strings.Contains(cluster, q.Filter)
}

// page cuts items into pages of size; a page past the end is the last one.
func page[T any](items []T, n, size int) Paged[T] {
	pages := (len(items) + size - 1) / size
	if pages == 0 {
		pages = 1
	}
	if n >= pages {
		n = pages - 1
	}
	lo := n * size
	hi := min(lo+size, len(items))
	out := Paged[T]{Page: n, Pages: pages, Total: len(items), Items: items[lo:hi]}
	if out.Items == nil {
		out.Items = []T{}
	}
	return out
}
