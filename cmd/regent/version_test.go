package main

import (
	"bytes"
	"encoding/json"
	"runtime"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	regentversion "regent.dev/regent/version"
)

func TestVersion_PrintsTheGoVersionAndJSON(t *testing.T) {
	for _, args := range [][]string{{"version"}, {"version", "-o", "json"}} {
		root := newRootCommand()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetArgs(args)
		if err := root.Execute(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if !strings.Contains(out.String(), runtime.Version()) {
			t.Errorf("%v printed %q, without the Go version %s", args, out.String(), runtime.Version())
		}
		if len(args) == 3 {
			var v version
			if err := json.Unmarshal(out.Bytes(), &v); err != nil || v.Version != regentversion.Version() {
				t.Errorf("-o json printed %q, want version %s: %v", out.String(), regentversion.Version(), err)
			}
		}
	}
	root := newRootCommand()
	root.SetArgs([]string{"version", "-o", "yaml"})
	if err := root.Execute(); err == nil {
		t.Error("-o yaml accepted")
	}
}

func TestRoot_EverySubcommandTakesTheLogFlags(t *testing.T) {
	walk(newRootCommand(), func(c *cobra.Command) {
		if c.Flags().Lookup("zap-log-level") == nil && c.PersistentFlags().Lookup("zap-log-level") == nil && c.InheritedFlags().Lookup("zap-log-level") == nil {
			t.Errorf("%s has no --zap-log-level", c.CommandPath())
		}
	})
}
