package hub

import (
	"bufio"
	"cmp"
	"compress/gzip"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/prometheus/common/expfmt"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// In the text format, which Prometheus and curl get unless they ask for protobuf,
// policy_governance_info is written series by series straight from the cached policies, between
// the registry's families as its name sorts: a scrape then holds one pointer per series (~2 MB at
// 150,000) instead of the family built for Gather (~15 MB, the largest transient left in the hub's
// peak heap at that scale, docs/benchmarks.md Session 22). The series are in a stable order
// of their own (roots, then replicas by cluster namespace and name), which the format leaves free.

// serveText answers a scrape that negotiated the text format; it returns false, having written
// nothing, for any other format.
func (g *governanceMetrics) serveText(w http.ResponseWriter, r *http.Request) bool {
	format := expfmt.Negotiate(r.Header)
	if format.FormatType() != expfmt.TypeTextPlain {
		return false
	}
	families, err := g.registry.Gather()
	if err != nil {
		// As promhttp's HTTPErrorOnError: a partial answer would read as series gone.
		http.Error(w, "An error has occurred while serving metrics:\n\n"+err.Error(), http.StatusInternalServerError)
		return true
	}
	policies, ok := g.policies()
	w.Header().Set("Content-Type", string(format))
	var out io.Writer = w
	if acceptsGzip(r) {
		w.Header().Set("Content-Encoding", "gzip")
		gz := gzip.NewWriter(w)
		defer gz.Close()
		out = gz
	}
	buf := bufio.NewWriterSize(out, 64<<10)
	defer buf.Flush()
	enc := expfmt.NewEncoder(buf, format)
	for _, f := range families {
		if ok && f.GetName() > governanceInfoName {
			writeGovernanceText(buf, policies)
			ok = false
		}
		if err := enc.Encode(f); err != nil {
			// The client went away, or a family the registry checked would not encode: the
			// status line is sent, so all that is left is to stop.
			g.log.Error(err, "encode metrics", "family", f.GetName())
			return true
		}
	}
	if ok {
		writeGovernanceText(buf, policies)
	}
	return true
}

// writeGovernanceText writes the family, sorting policies (the scrape's own slice) in place.
func writeGovernanceText(w *bufio.Writer, policies []client.Object) {
	var roots []client.Object
	replicas := policies[:0]
	for _, p := range policies {
		switch typ, _, _, _, ok := governanceLabels(p); {
		case !ok:
		case typ == "root":
			roots = append(roots, p)
		default:
			replicas = append(replicas, p)
		}
	}
	byNamespaceAndName := func(a, b client.Object) int {
		return cmp.Or(strings.Compare(a.GetNamespace(), b.GetNamespace()), strings.Compare(a.GetName(), b.GetName()))
	}
	slices.SortFunc(roots, byNamespaceAndName)
	slices.SortFunc(replicas, byNamespaceAndName)
	_, _ = w.WriteString("# HELP " + governanceInfoName + " " + governanceInfoHelp + "\n# TYPE " + governanceInfoName + " gauge\n")
	for _, series := range [][]client.Object{roots, replicas} {
		for _, p := range series {
			writeGovernanceSeries(w, p)
		}
	}
}

func writeGovernanceSeries(w *bufio.Writer, p client.Object) {
	typ, policy, policyNS, clusterNS, _ := governanceLabels(p)
	_, _ = w.WriteString(governanceInfoName + `{cluster_namespace="`)
	writeLabelValue(w, clusterNS)
	_, _ = w.WriteString(`",policy="`)
	writeLabelValue(w, policy)
	_, _ = w.WriteString(`",policy_namespace="`)
	writeLabelValue(w, policyNS)
	_, _ = w.WriteString(`",type="`)
	_, _ = w.WriteString(typ)
	switch complianceValue(complianceOf(p)) {
	case 0:
		_, _ = w.WriteString("\"} 0\n")
	case 1:
		_, _ = w.WriteString("\"} 1\n")
	default:
		_, _ = w.WriteString("\"} -1\n")
	}
}

// writeLabelValue escapes as the text format requires. Kubernetes names never need it; a
// hand-made replica name might.
func writeLabelValue(w *bufio.Writer, v string) {
	for i := 0; i < len(v); i++ {
		switch c := v[i]; c {
		case '\\':
			_, _ = w.WriteString(`\\`)
		case '"':
			_, _ = w.WriteString(`\"`)
		case '\n':
			_, _ = w.WriteString(`\n`)
		default:
			_ = w.WriteByte(c)
		}
	}
}

// acceptsGzip says whether the request's Accept-Encoding takes gzip (and not with q=0).
func acceptsGzip(r *http.Request) bool {
	for _, part := range strings.Split(r.Header.Get("Accept-Encoding"), ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.TrimSpace(coding) != "gzip" {
			continue
		}
		q := strings.ReplaceAll(params, " ", "")
		return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
	}
	return false
}
