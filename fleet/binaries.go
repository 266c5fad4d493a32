package fleet

import (
	"fmt"
	"os"
	"path/filepath"
)

// Versions of the binaries the fleet runs; hack/testbin.sh builds exactly these into
// DefaultBinDir, and a test keeps the two in step.
const (
	KubernetesVersion = "v1.35.4"
	EtcdVersion       = "v3.6.5"
	OCMVersion        = "v1.2.1"
)

// BinDirEnv overrides where the fleet looks for its binaries.
const BinDirEnv = "REGENT_TESTBIN"

// binaries every fleet needs; `ocm` (OCM's placement controller, hub controllers and agents in
// one binary) only tests that want real placement decisions or Options.OCMAgents.
var requiredBinaries = []string{"kube-apiserver", "etcd", "kube-controller-manager"}

// DefaultBinDir is the versioned cache folder `make testbin` fills.
func DefaultBinDir() string {
	if dir := os.Getenv(BinDirEnv); dir != "" {
		return dir
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "regent", "testbin",
		fmt.Sprintf("k8s-%s-etcd-%s-ocm-%s", KubernetesVersion, EtcdVersion, OCMVersion))
}

// CheckBinaries says which binary is missing from dir and how to get it.
func CheckBinaries(dir string) error {
	for _, name := range requiredBinaries {
		if err := checkBinary(dir, name); err != nil {
			return err
		}
	}
	return nil
}

// Binary returns the path of a test binary (e.g. "ocm"), or an error that says to run
// `make testbin`.
func Binary(dir, name string) (string, error) {
	if err := checkBinary(dir, name); err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

func checkBinary(dir, name string) error {
	info, err := os.Stat(filepath.Join(dir, name))
	if err != nil || info.Mode()&0o111 == 0 {
		return fmt.Errorf("%s not found in %s: run `make testbin` (it builds the fleet's binaries from the Go module proxy)", name, dir)
	}
	return nil
}
