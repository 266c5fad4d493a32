package hub

import (
	"bufio"
	"compress/gzip"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// expectScrapesAsGathered fails unless h's /metrics says in text (plain and gzipped) and in
// protobuf what gov.Gather does: the same families in name order, policy_governance_info with
// the same series and values.
func expectScrapesAsGathered(t *testing.T, gov *governanceMetrics, h http.Handler) {
	t.Helper()
	gathered, err := gov.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	want := map[string]float64{}
	for _, f := range gathered {
		names = append(names, f.GetName())
		if f.GetName() == governanceInfoName {
			want = seriesOf(f)
		}
	}
	if len(want) == 0 {
		t.Fatal("Gather has no policy_governance_info to compare with")
	}
	for _, encoding := range []string{"", "gzip"} {
		req := httptest.NewRequest(http.MethodGet, metricsPath, nil)
		req.Header.Set("Accept-Encoding", encoding)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if got := rec.Header().Get("Content-Encoding"); got != encoding {
			t.Fatalf("Accept-Encoding %q: Content-Encoding %q", encoding, got)
		}
		var body io.Reader = rec.Body
		if encoding == "gzip" {
			if body, err = gzip.NewReader(rec.Body); err != nil {
				t.Fatal(err)
			}
		}
		raw, err := io.ReadAll(body)
		if err != nil {
			t.Fatal(err)
		}
		var order []string
		for _, line := range strings.Split(string(raw), "\n") {
			if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
				order = append(order, strings.Fields(name)[0])
			}
		}
		if !slices.Equal(order, names) {
			t.Errorf("text (%q): families %v, want %v as Gather has them", encoding, order, names)
		}
		parser := expfmt.NewTextParser(model.UTF8Validation)
		families, err := parser.TextToMetricFamilies(strings.NewReader(string(raw)))
		if err != nil {
			t.Fatalf("text (%q) does not parse: %v", encoding, err)
		}
		if got := seriesOf(families[governanceInfoName]); !maps.Equal(got, want) {
			t.Errorf("text (%q): policy_governance_info %v, want %v", encoding, got, want)
		}
		if f := families[governanceInfoName]; f.GetHelp() != governanceInfoHelp || f.GetType() != dto.MetricType_GAUGE {
			t.Errorf("text (%q): help %q, type %v", encoding, f.GetHelp(), f.GetType())
		}
	}

	proto := expfmt.NewFormat(expfmt.TypeProtoDelim)
	req := httptest.NewRequest(http.MethodGet, metricsPath, nil)
	req.Header.Set("Accept", string(proto))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	dec := expfmt.NewDecoder(rec.Body, proto)
	var got map[string]float64
	for {
		f := &dto.MetricFamily{}
		if err := dec.Decode(f); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("protobuf scrape: %v", err)
		}
		if f.GetName() == governanceInfoName {
			got = seriesOf(f)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("protobuf: policy_governance_info %v, want %v", got, want)
	}
}

// seriesOf is a family's series by their labels written name=value, sorted.
func seriesOf(f *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.GetMetric() {
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		sort.Strings(labels)
		out[strings.Join(labels, ",")] = m.GetGauge().GetValue()
	}
	return out
}

func TestGovernanceText_EscapesLabelValuesAndNegotiatesGzip(t *testing.T) {
	var sb strings.Builder
	w := bufio.NewWriter(&sb)
	writeLabelValue(w, "a\\b\"c\nd")
	_ = w.Flush()
	if got, want := sb.String(), `a\\b\"c\nd`; got != want {
		t.Errorf("escaped %q, want %q", got, want)
	}
	for header, want := range map[string]bool{"": false, "gzip": true, "deflate, gzip;q=0.5": true,
		"gzip;q=0": false, "br": false, "identity, gzip ; q=1": true} {
		req := httptest.NewRequest(http.MethodGet, metricsPath, nil)
		req.Header.Set("Accept-Encoding", header)
		if got := acceptsGzip(req); got != want {
			t.Errorf("Accept-Encoding %q: gzip %v, want %v", header, got, want)
		}
	}
}
