package quickstart

import (
	"os"
	"path/filepath"
	"testing"
)

func TestTestbinScript_FoundFromTheCloneOrBesideTheBinary(t *testing.T) {
	clone := t.TempDir()
	script := filepath.Join(clone, defaultTestbinScript)
	if err := os.MkdirAll(filepath.Dir(script), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(script, []byte("#!/bin/bash\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	exe := filepath.Join(clone, "bin", "regent")
	elsewhere := t.TempDir()
	for _, c := range []struct {
		name, dir, exe, want string
	}{
		{"from the clone", clone, "", script},
		{"beside bin/regent, started elsewhere", elsewhere, exe, script},
		{"nowhere", elsewhere, filepath.Join(elsewhere, "regent"), ""},
	} {
		if got := findTestbinScript(c.dir, c.exe); got != c.want {
			t.Errorf("%s: %q, want %q", c.name, got, c.want)
		}
	}
}
