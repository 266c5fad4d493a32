package v1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func namespaced(ns, name string) PolicyReference {
	return PolicyReference{Kind: KindAdmissionPolicy, Namespace: ns, Name: name}
}

func TestServerPolicyName_TenantsWithKubewardensCollidingNamesGetDistinctNames(t *testing.T) {
	a, b := namespaced("a", "b-c"), namespaced("a-b", "c")
	if a.ServerPolicyName() == b.ServerPolicyName() {
		t.Errorf("a/b-c and a-b/c share the server policy name %q", a.ServerPolicyName())
	}
	if a.RevisionName(1) == b.RevisionName(1) || a.LabelValue() == b.LabelValue() {
		t.Errorf("a/b-c and a-b/c share revision %q or label %q", a.RevisionName(1), a.LabelValue())
	}
}

func TestServerPolicyName_KeepsKubewardensFormWhereItIsUnambiguous(t *testing.T) {
	for ref, want := range map[PolicyReference]string{
		{Kind: KindClusterAdmissionPolicy, Name: "psp-a"}:                         "clusterwide-psp-a",
		namespaced("default", "no-latest"):                                        "namespaced-default-no-latest",
		namespaced("team-a", "no-latest"):                                         "namespaced.team-a.no-latest",
		namespaced("team-a", "v1.no-latest"):                                      "namespaced.team-a.v1.no-latest",
		{Kind: KindClusterAdmissionPolicyGroup, Name: "psp-a"}:                    "group.clusterwide-psp-a",
		{Kind: KindAdmissionPolicyGroup, Namespace: "default", Name: "no-latest"}: "group.namespaced-default-no-latest",
	} {
		if got := ref.ServerPolicyName(); got != want {
			t.Errorf("%+v: %q, want %q", ref, got, want)
		}
	}
}

// words lists every string of length 1..max over alphabet that valid accepts.
func words(alphabet string, max int, valid func(string) bool) []string {
	var out []string
	level := []string{""}
	for n := 1; n <= max; n++ {
		var next []string
		for _, w := range level {
			for _, c := range alphabet {
				next = append(next, w+string(c))
			}
		}
		for _, w := range next {
			if valid(w) {
				out = append(out, w)
			}
		}
		level = next
	}
	return out
}

// TestServerPolicyName_InjectiveOverEveryShortNamespaceAndName checks the proof in names.go by
// exhaustion: every valid namespace and policy name of up to four characters over an alphabet
// with both separators, of every kind (groups included), gives its own server policy name, revision names and label.
func TestServerPolicyName_InjectiveOverEveryShortNamespaceAndName(t *testing.T) {
	label := func(s string) bool { return len(validation.IsDNS1123Label(s)) == 0 }
	subdomain := func(s string) bool { return len(validation.IsDNS1123Subdomain(s)) == 0 }
	namespaces := words("ab-", 4, label)
	names := words("ab-.1g", 4, subdomain)
	var refs []PolicyReference
	for _, name := range names {
		refs = append(refs, PolicyReference{Kind: KindClusterAdmissionPolicy, Name: name},
			PolicyReference{Kind: KindClusterAdmissionPolicyGroup, Name: name})
		for _, ns := range namespaces {
			refs = append(refs, namespaced(ns, name), PolicyReference{Kind: KindAdmissionPolicyGroup, Namespace: ns, Name: name})
		}
	}
	seen := map[string]PolicyReference{}
	claim := func(what string, ref PolicyReference) {
		if other, ok := seen[what]; ok {
			t.Fatalf("%+v and %+v both map to %q", other, ref, what)
		}
		seen[what] = ref
	}
	for _, ref := range refs {
		claim("server:"+ref.ServerPolicyName(), ref)
		claim("label:"+ref.LabelValue(), ref)
		for _, gen := range []int64{1, 2, 11, 12, 112} {
			claim("revision:"+ref.RevisionName(gen), ref)
		}
	}
	if len(refs) < 10000 {
		t.Fatalf("only %d references checked", len(refs))
	}
}

func TestFitName_LongNamesStayValidAndDistinct(t *testing.T) {
	ns := strings.Repeat("n", 30) + "-" + strings.Repeat("m", 32)    // 63, a dash
	long := strings.Repeat("p", 200) + "." + strings.Repeat("q", 52) // 253
	refs := []PolicyReference{
		namespaced(ns, long), namespaced(ns, long[:252]+"r"), namespaced(strings.Repeat("n", 63), long),
		{Kind: KindClusterAdmissionPolicy, Name: long},
	}
	seen := map[string]bool{}
	for _, ref := range refs {
		rev, lbl := ref.RevisionName(9223372036854775807), ref.LabelValue()
		if errs := validation.IsDNS1123Subdomain(rev); len(errs) > 0 {
			t.Errorf("revision name %q: %v", rev, errs)
		}
		if errs := validation.IsValidLabelValue(lbl); len(errs) > 0 {
			t.Errorf("label value %q: %v", lbl, errs)
		}
		if seen[rev] || seen[lbl] {
			t.Errorf("%+v: %q or %q given twice", ref, rev, lbl)
		}
		seen[rev], seen[lbl] = true, true
	}
	// A dot where the name is cut would put ".-" in it.
	cut := strings.Repeat("a", MaxLabelValue-hashLength-2) + ".bbbbbbbbbbbbbbbbbbbbbbbbbbb"
	if got := FitName(cut, MaxLabelValue); len(validation.IsValidLabelValue(got)) > 0 || len(validation.IsDNS1123Subdomain(got)) > 0 {
		t.Errorf("FitName(%q) = %q is not a valid label value and subdomain", cut, got)
	}
	short := strings.Repeat("a", MaxLabelValue-1)
	if FitName(short, MaxLabelValue) != short || len(FitName(short+"a", MaxLabelValue)) != MaxLabelValue {
		t.Errorf("a name shorter than the limit must be kept and one at the limit fitted to it")
	}
}
