package v1alpha1

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestPolicyLabelKey(t *testing.T) {
	long := strings.Repeat("x", 64)
	for _, tc := range []struct {
		scope      PolicyScope
		name, want string
		hashed     bool
	}{
		{PolicyScopeNamespaced, "require-labels", "pol.reports.regent.dev/require-labels", false},
		{PolicyScopeCluster, "require-labels", "cpol.reports.regent.dev/require-labels", false},
		{"", "p", "cpol.reports.regent.dev/p", false},
		{PolicyScopeCluster, strings.Repeat("x", 63), "cpol.reports.regent.dev/" + strings.Repeat("x", 63), false},
		{PolicyScopeCluster, long, "cpol.reports.regent.dev/h-" + hash(long)[:40], true},
		// a real name that looks like a hash is hashed too, so it cannot collide with one
		{PolicyScopeCluster, "h-abc", "cpol.reports.regent.dev/h-" + hash("h-abc")[:40], true},
	} {
		key, hashed := PolicyLabelKey(tc.scope, tc.name)
		if key != tc.want || hashed != tc.hashed {
			t.Errorf("PolicyLabelKey(%q, %q) = %q, %v; want %q, %v", tc.scope, tc.name, key, hashed, tc.want, tc.hashed)
		}
		if errs := validation.IsQualifiedName(key); len(errs) > 0 {
			t.Errorf("key %q is not a valid label key: %v", key, errs)
		}
	}
}

func TestLabelSafe(t *testing.T) {
	for in, want := range map[string]string{
		"":                      "",
		"apps":                  "apps",
		"42":                    "42",
		strings.Repeat("g", 64): "h-" + hash(strings.Repeat("g", 64))[:40],
		"-bad":                  "h-" + hash("-bad")[:40],
	} {
		if got := LabelSafe(in); got != want {
			t.Errorf("LabelSafe(%q) = %q, want %q", in, got, want)
		}
	}
}
