package main

import (
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// --real-node without what a node needs fails before anything starts, naming each missing piece:
// here root (the test drops to nobody when it runs as root) and the kubenode binary (an empty
// --bin-dir); it never falls back to a fleet without the node.
func TestQuickstart_RealNodeWithoutRootOrBinariesFailsAtOnceNamingWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	bin := filepath.Join(dir, "regent")
	copyExecutable(t, os.Args[0], bin)
	empty := filepath.Join(dir, "empty-bin")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(tmp, 0o777); err != nil { // past the umask
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), cliEnv+"=quickstart --real-node --lifetime 1m --testbin-script= --bin-dir "+empty, "TMPDIR="+tmp)
	if os.Geteuid() == 0 {
		// Let nobody reach the copied binary, and run it as nobody.
		for d := dir; d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
			if err := os.Chmod(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, err := cmd.CombinedOutput()
	t.Logf("%s", out)
	if err == nil {
		t.Fatal("quickstart --real-node succeeded without root and without kubenode")
	}
	for _, want := range []string{"--real-node", "a real node cannot run here", "not root", "kubenode"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q", want)
		}
	}
	for _, never := range []string{"starting hub", "fleet is up", "building them now"} {
		if strings.Contains(string(out), never) {
			t.Errorf("quickstart went on after the refusal (%q)", never)
		}
	}
}

func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}
