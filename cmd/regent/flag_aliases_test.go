package main

import (
	"testing"
)

// Renamed flags keep working under their old names, bound to the same value and hidden.
func TestDeprecatedFlagNamesStillSetTheRenamedFlags(t *testing.T) {
	cases := []struct{ command, old, current, value string }{
		{"hub", "qps", "kube-api-qps", "7"},
		{"hub", "burst", "kube-api-burst", "9"},
		{"policy-server", "metrics-addr", "metrics-bind-address", "127.0.0.1:1234"},
	}
	for _, c := range cases {
		root := newRootCommand()
		cmd, _, err := root.Find([]string{c.command})
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Flags().Parse([]string{"--" + c.old + "=" + c.value}); err != nil {
			t.Fatalf("%s --%s: %v", c.command, c.old, err)
		}
		if got := cmd.Flags().Lookup(c.current).Value.String(); got != c.value {
			t.Errorf("%s --%s=%s left --%s at %s", c.command, c.old, c.value, c.current, got)
		}
		if !cmd.Flags().Lookup(c.old).Hidden {
			t.Errorf("%s --%s shows in help", c.command, c.old)
		}
	}
}
