package main

import (
	"bytes"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Two builds of the same binary at the same SOURCE_DATE_EPOCH write byte-identical archives and
// report the same digest; a build without a time is refused rather than stamped with the clock.
func TestRun_SameSourceSameArchiveAndDigest(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "regent")
	if err := os.WriteFile(bin, []byte("not an ELF, bytes all the same"), 0o755); err != nil {
		t.Fatal(err)
	}
	build := func(name string) (string, [32]byte) {
		t.Helper()
		var out bytes.Buffer
		tarball := filepath.Join(dir, name+".tar")
		err := run([]string{"--binary", bin, "--ref", "registry.example/regent:v1.2.3", "--version", "v1.2.3",
			"--created", "1700000000", "--tarball", tarball, "--layout", filepath.Join(dir, name)}, &out)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(tarball)
		if err != nil {
			t.Fatal(err)
		}
		return out.String(), sha256.Sum256(b)
	}
	out1, sum1 := build("one")
	out2, sum2 := build("two")
	if out1 != out2 || sum1 != sum2 {
		t.Errorf("two builds differ:\n%s%x\n%s%x", out1, sum1, out2, sum2)
	}
	if !strings.Contains(out1, "digest: sha256:") {
		t.Errorf("no digest printed: %q", out1)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "")
	if err := run([]string{"--binary", bin, "--ref", "registry.example/regent:v1", "--tarball", filepath.Join(dir, "x.tar")}, &bytes.Buffer{}); err == nil {
		t.Error("built without SOURCE_DATE_EPOCH or --created")
	}
}
