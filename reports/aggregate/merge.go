package aggregate

import (
	"cmp"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	"k8s.io/apimachinery/pkg/util/validation"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/reports"
)

// DefaultMaxResults bounds the results of one Report. A result is a few hundred bytes, so 1000
// stays far below etcd's 1.5 MiB object limit even with long messages.
const DefaultMaxResults = 1000

// Desired is one Report (ClusterReport for the cluster scope) the aggregator should write.
type Desired struct {
	Name    string
	Policy  string
	Scope   reportsv1alpha1.PolicyScope
	Part    int // 1-based
	Results []openreportsv1alpha1.ReportResult
	Summary openreportsv1alpha1.ReportSummary
}

// Merge groups the results of every per-resource report of one namespace by policy, sorts each
// group, splits a group of more than maxResults results (DefaultMaxResults when maxResults < 1)
// into numbered parts and counts each part's summary. The output is sorted by name and does not
// depend on the order of specs.
func Merge(specs []*reportsv1alpha1.ResourceReportSpec, maxResults int) []Desired {
	if maxResults < 1 {
		maxResults = DefaultMaxResults
	}
	type key struct {
		scope  reportsv1alpha1.PolicyScope
		policy string
	}
	groups := map[key][]openreportsv1alpha1.ReportResult{}
	for _, s := range specs {
		for i := range s.Results {
			r := s.Results[i]
			if r.Policy == "" {
				continue // no Report to put it in; producers always name the policy
			}
			k := key{reports.ScopeOf(&r), r.Policy}
			groups[k] = append(groups[k], r)
		}
	}
	var out []Desired
	for k, results := range groups {
		reports.SortResults(results)
		for part := 1; len(results) > 0; part++ {
			n := min(maxResults, len(results))
			d := Desired{
				Name:    ReportName(k.scope, k.policy, part),
				Policy:  k.policy,
				Scope:   k.scope,
				Part:    part,
				Results: results[:n:n],
				Summary: Summarize(results[:n]),
			}
			out = append(out, d)
			results = results[n:]
		}
	}
	sortDesired(out)
	uniqueNames(out)
	return out
}

// uniqueNames gives every Desired but the first of a run sharing a name the suffix "-" and a hash
// of its policy, scope and part, so no two policies ever write the same Report.
func uniqueNames(d []Desired) {
	renamed := false
	for i := 1; i < len(d); i++ {
		if d[i].Name != ReportName(d[i-1].Scope, d[i-1].Policy, d[i-1].Part) {
			continue
		}
		sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%s/%d", d[i].Scope, d[i].Policy, d[i].Part)))
		d[i].Name = d[i].Name[:min(len(d[i].Name), 200)] + "-" + hex.EncodeToString(sum[:])[:10]
		renamed = true
	}
	if renamed {
		sortDesired(d)
	}
}

// ReportName is "pol-<policy>" for a namespaced policy and "cpol-<policy>" for a cluster-wide
// one, with "-part-<n>" from the second part on. A name longer than an object name allows keeps
// its first 200 characters and appends a hash of the whole, so distinct policies never share a
// Report. Merge renames the rare clash of a policy literally named "<other>-part-2" with the
// other's second part (see uniqueNames).
//
// A group's policy name, group/<name>, has a slash no object name may hold: it becomes a dot.
// A ClusterAdmissionPolicy literally named group.<name> then clashes with the group, which
// uniqueNames resolves like the part clash.
func ReportName(scope reportsv1alpha1.PolicyScope, policy string, part int) string {
	policy = strings.ReplaceAll(policy, "/", ".")
	name := "cpol-" + policy
	if scope == reportsv1alpha1.PolicyScopeNamespaced {
		name = "pol-" + policy
	}
	if part > 1 {
		name += "-part-" + strconv.Itoa(part)
	}
	if len(name) > validation.DNS1123SubdomainMaxLength {
		sum := sha256.Sum256([]byte(name))
		name = name[:200] + "-" + hex.EncodeToString(sum[:])[:40]
	}
	return name
}

// Summarize counts results by outcome.
func Summarize(results []openreportsv1alpha1.ReportResult) openreportsv1alpha1.ReportSummary {
	var s openreportsv1alpha1.ReportSummary
	for i := range results {
		switch results[i].Result {
		case "pass":
			s.Pass++
		case "fail":
			s.Fail++
		case "warn":
			s.Warn++
		case "error":
			s.Error++
		case "skip":
			s.Skip++
		}
	}
	return s
}

func sortDesired(d []Desired) {
	slices.SortFunc(d, func(a, b Desired) int {
		return cmp.Or(cmp.Compare(a.Name, b.Name), cmp.Compare(a.Scope, b.Scope), cmp.Compare(a.Policy, b.Policy), cmp.Compare(a.Part, b.Part))
	})
}
