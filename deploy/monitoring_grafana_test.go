package deploy

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// registered is a metric Regent's code creates: its kind decides which series names exist
// (a histogram's _bucket, _sum and _count) and its labels which names a query may group by.
type registered struct {
	histogram bool
	labels    []string
}

// regentMetrics reads every prometheus constructor in the repository's non-test Go code: the
// names and labels the processes register, taken from the source itself so the dashboard cannot
// drift from it unnoticed.
func regentMetrics(t *testing.T) map[string]registered {
	t.Helper()
	out := map[string]registered{}
	fset := token.NewFileSet()
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		lists := stringLists(f)
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if pkg, ok := sel.X.(*ast.Ident); !ok || pkg.Name != "prometheus" {
				return true
			}
			ctor := sel.Sel.Name
			switch {
			case ctor == "NewDesc" && len(call.Args) >= 3:
				name, ok := stringLit(call.Args[0])
				if !ok {
					t.Errorf("%s: prometheus.NewDesc with a name that is not a literal", fset.Position(call.Pos()))
					return true
				}
				out[name] = registered{labels: labelsOf(call.Args[2], lists)}
			case strings.HasPrefix(ctor, "New") && len(call.Args) >= 1:
				opts, ok := call.Args[0].(*ast.CompositeLit)
				if !ok {
					return true
				}
				var parts []string
				for _, field := range []string{"Namespace", "Subsystem", "Name"} {
					for _, e := range opts.Elts {
						if kv, ok := e.(*ast.KeyValueExpr); ok && kv.Key.(*ast.Ident).Name == field {
							s, ok := stringLit(kv.Value)
							if !ok {
								t.Errorf("%s: %s %s is not a literal", fset.Position(kv.Pos()), ctor, field)
							}
							if s != "" {
								parts = append(parts, s)
							}
						}
					}
				}
				if len(parts) == 0 {
					return true
				}
				r := registered{histogram: strings.Contains(ctor, "Histogram") || strings.Contains(ctor, "Summary")}
				if strings.HasSuffix(ctor, "Vec") && len(call.Args) >= 2 {
					r.labels = labelsOf(call.Args[1], lists)
				}
				out[strings.Join(parts, "_")] = r
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// stringLists holds the file's package-level []string variables (label lists shared by metrics).
func stringLists(f *ast.File) map[string][]string {
	out := map[string][]string{}
	for _, decl := range f.Decls {
		g, ok := decl.(*ast.GenDecl)
		if !ok {
			continue
		}
		for _, spec := range g.Specs {
			v, ok := spec.(*ast.ValueSpec)
			if !ok {
				continue
			}
			for i, name := range v.Names {
				if i < len(v.Values) {
					if l := literalList(v.Values[i]); l != nil {
						out[name.Name] = l
					}
				}
			}
		}
	}
	return out
}

func labelsOf(e ast.Expr, lists map[string][]string) []string {
	if id, ok := e.(*ast.Ident); ok {
		return lists[id.Name]
	}
	return literalList(e)
}

func literalList(e ast.Expr) []string {
	lit, ok := e.(*ast.CompositeLit)
	if !ok {
		return nil
	}
	var out []string
	for _, el := range lit.Elts {
		if s, ok := stringLit(el); ok {
			out = append(out, s)
		}
	}
	return out
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

// grafanaPanel is the part of a Grafana panel the check reads; rows nest panels.
type grafanaPanel struct {
	Title   string         `json:"title"`
	Type    string         `json:"type"`
	Panels  []grafanaPanel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

var (
	promStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers  = regexp.MustCompile(`\{([^}]*)\}`)
	promRanges    = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping  = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	promIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promNumbers   = regexp.MustCompile(`\b[0-9][0-9.]*(?:ms|[smhdwy])?\b`)
	promFunction  = regexp.MustCompile(`[a-zA-Z_][a-zA-Z0-9_]*\s*\(`)
	promLabelName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)`)
	promKeywords  = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
)

// metricsOf splits a PromQL expression into the metric names it selects and the label names it
// matches or groups by.
func metricsOf(expr string) (metrics, labels []string) {
	expr = promStrings.ReplaceAllString(expr, `""`)
	for _, m := range promMatchers.FindAllStringSubmatch(expr, -1) {
		for _, l := range promLabelName.FindAllStringSubmatch(m[1], -1) {
			labels = append(labels, l[1])
		}
	}
	expr = promMatchers.ReplaceAllString(expr, " ")
	for _, g := range promGrouping.FindAllStringSubmatch(expr, -1) {
		labels = append(labels, promIdent.FindAllString(g[1], -1)...)
	}
	expr = promGrouping.ReplaceAllString(expr, " ")
	expr = promRanges.ReplaceAllString(expr, " ")
	expr = promFunction.ReplaceAllString(expr, "(")
	expr = promNumbers.ReplaceAllString(expr, " ")
	for _, id := range promIdent.FindAllString(expr, -1) {
		if !slices.Contains(promKeywords, strings.ToLower(id)) {
			metrics = append(metrics, id)
		}
	}
	return metrics, labels
}

// Every query of the Grafana dashboard selects metrics Regent registers, by series names they
// have (a histogram's _bucket, _sum, _count), and matches or groups by labels they carry.
func TestGrafanaDashboard_QueriesOnlyWhatRegentRegisters(t *testing.T) {
	known := regentMetrics(t)
	if len(known) < 20 {
		t.Fatalf("found only %d metrics in the source: %v", len(known), known)
	}
	b, err := os.ReadFile("monitoring/grafana-dashboard.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		UID    string         `json:"uid"`
		Panels []grafanaPanel `json:"panels"`
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	if dash.UID == "" {
		t.Error("the dashboard has no uid: importing it twice would make two")
	}
	queries := 0
	var walk func([]grafanaPanel)
	walk = func(panels []grafanaPanel) {
		for _, p := range panels {
			walk(p.Panels)
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, target := range p.Targets {
				queries++
				metrics, labels := metricsOf(target.Expr)
				if len(metrics) == 0 {
					t.Errorf("panel %q: %q selects no metric", p.Title, target.Expr)
				}
				carried := []string{}
				for _, m := range metrics {
					base, histogram := m, false
					for _, suffix := range []string{"_bucket", "_sum", "_count"} {
						if b, ok := strings.CutSuffix(m, suffix); ok && known[b].histogram {
							base, histogram = b, true
						}
					}
					r, ok := known[base]
					if !ok {
						t.Errorf("panel %q: %s is not a metric Regent registers", p.Title, m)
						continue
					}
					carried = append(carried, r.labels...)
					if histogram && strings.HasSuffix(m, "_bucket") {
						carried = append(carried, "le")
					}
				}
				for _, l := range labels {
					if !slices.Contains(carried, l) {
						t.Errorf("panel %q: %q uses label %s, which %v do not carry (%v)", p.Title, target.Expr, l, metrics, carried)
					}
				}
			}
		}
	}
	walk(dash.Panels)
	if queries == 0 {
		t.Fatal("the dashboard has no queries")
	}
}

// The check itself: it names a misspelt metric and a label the metric does not have.
func TestMetricsOf_SplitsMetricsAndLabels(t *testing.T) {
	m, l := metricsOf(`histogram_quantile(0.95, sum by (le, policy) (rate(regent_x_bucket{mode="a", b!~"c"}[5m]))) / on (policy) group_left sum(y_total offset 5m)`)
	if !slices.Equal(m, []string{"regent_x_bucket", "y_total"}) || !slices.Equal(l, []string{"mode", "b", "le", "policy", "policy"}) {
		t.Errorf("metrics %v, labels %v", m, l)
	}
}
