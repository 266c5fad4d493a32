package guests

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
)

// RepoRoot finds the module root by walking up from the working directory to go.mod, so tests
// and the benchmark find testdata wherever they run from inside the repository.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if b, err := os.ReadFile(filepath.Join(dir, "go.mod")); err == nil && strings.HasPrefix(string(b), "module regent.dev/regent\n") {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("not inside the regent.dev/regent module")
		}
		dir = parent
	}
}

// CacheDir is where built guests and wazero's compiled code are kept between runs.
func CacheDir(sub string) (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.TempDir()
	}
	dir := filepath.Join(base, "regent", sub)
	return dir, os.MkdirAll(dir, 0o755)
}

var buildMu sync.Mutex

// Build returns the wasm of testdata/guests/<name>. Guests named wapc-* are built as reactors
// (-buildmode=c-shared), the waPC shape; the others as WASI commands.
func Build(name string) ([]byte, error) {
	buildMu.Lock()
	defer buildMu.Unlock()
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	src := filepath.Join(root, "policyserver", "testdata", "guests", name)
	args := []string{"build", "-trimpath", "-o"}
	var extra []string
	if strings.HasPrefix(name, "wapc-") {
		extra = []string{"-buildmode=c-shared"}
	}
	key, err := sourceKey(src, extra)
	if err != nil {
		return nil, err
	}
	dir, err := CacheDir("guests")
	if err != nil {
		return nil, err
	}
	out := filepath.Join(dir, name+"-"+key[:16]+".wasm")
	if b, err := os.ReadFile(out); err == nil {
		return b, nil
	}
	tmp := out + fmt.Sprintf(".%d.tmp", os.Getpid())
	cmd := exec.Command("go", append(append(args, tmp), append(extra, ".")...)...)
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOOS=wasip1", "GOARCH=wasm", "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("build guest %s: %w\n%s", name, err, b)
	}
	if err := os.Rename(tmp, out); err != nil {
		return nil, err
	}
	return os.ReadFile(out)
}

func sourceKey(dir string, extra []string) (string, error) {
	h := sha256.New()
	fmt.Fprintln(h, runtime.Version(), extra)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("read guest sources: %w", err)
	}
	names := []string{}
	for _, e := range entries {
		if !e.IsDir() {
			names = append(names, e.Name())
		}
	}
	slices.Sort(names)
	for _, n := range names {
		b, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "%s %d\n", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
