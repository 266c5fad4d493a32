package configpolicy

import (
	"strings"
	"testing"

	policyv1 "regent.dev/regent/api/policy/v1"
)

func TestEffectiveRecordDiff(t *testing.T) {
	cases := []struct {
		set         policyv1.RecordDiff
		group, kind string
		want        policyv1.RecordDiff
	}{
		{"", "", "ServiceAccount", "InStatus"},
		{"", "apps", "Deployment", "InStatus"},
		{"", "", "ConfigMap", recordDiffCensored},
		{"", "", "Secret", recordDiffCensored},
		{"InStatus", "", "ConfigMap", "InStatus"},
		{"InStatus", "", "Secret", recordDiffCensored},
		{"Log", "", "Secret", "Log"},
		{"None", "apps", "Deployment", "None"},
		{"", "example.com", "Secret", "InStatus"},
	}
	for _, c := range cases {
		if got := effectiveRecordDiff(c.set, c.group, c.kind); got != c.want {
			t.Errorf("effectiveRecordDiff(%q, %q, %q) = %q, want %q", c.set, c.group, c.kind, got, c.want)
		}
	}
}

func TestObjectDiffIgnoresBookkeeping(t *testing.T) {
	existing := map[string]any{"metadata": map[string]any{"name": "a", "resourceVersion": "7", "managedFields": []any{"x"}}, "spec": map[string]any{"replicas": int64(1)}}
	desired := map[string]any{"metadata": map[string]any{"name": "a", "resourceVersion": "8"}, "spec": map[string]any{"replicas": int64(2)}}
	d := objectDiff(existing, desired, "ns", "a")
	for _, want := range []string{"--- ns/a : existing", "+++ ns/a : updated", "-  replicas: 1", "+  replicas: 2"} {
		if !strings.Contains(d, want) {
			t.Errorf("diff lacks %q:\n%s", want, d)
		}
	}
	if strings.Contains(d, "resourceVersion") || strings.Contains(d, "managedFields") {
		t.Errorf("diff shows bookkeeping:\n%s", d)
	}
}
