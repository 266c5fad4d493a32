package fleet

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
)

// RealNodeEnv, set to 1, makes a missing real-node prerequisite a test failure instead of a skip
// (CI installs them, so there a skip would hide a broken setup).
const RealNodeEnv = "REGENT_REAL_NODE"

// cniBinDir is where Debian's containernetworking-plugins installs the plugins.
const cniBinDir = "/usr/lib/cni"

// CheckRealNode says what this machine lacks to run a real node: root (containers, mounts,
// cgroups, iptables), Debian's containerd, runc, the CNI plugins, iptables, conntrack, and the
// kubenode binary `make testbin` builds into binDir.
func CheckRealNode(binDir string) error {
	var errs []error
	if os.Geteuid() != 0 {
		errs = append(errs, errors.New("not root (a node mounts, creates cgroups and writes iptables rules)"))
	}
	for _, tool := range []struct{ name, pkg string }{
		{"containerd", "containerd"}, {"ctr", "containerd"}, {"runc", "runc"},
		{"iptables", "iptables"}, {"conntrack", "conntrack"}, {"ip", "iproute2"},
	} {
		if _, err := lookPath(tool.name); err != nil {
			errs = append(errs, fmt.Errorf("%s not found (apt-get install %s)", tool.name, tool.pkg))
		}
	}
	for _, plugin := range []string{"bridge", "host-local", "loopback"} {
		if _, err := os.Stat(filepath.Join(cniBinDir, plugin)); err != nil {
			errs = append(errs, fmt.Errorf("CNI plugin %s not in %s (apt-get install containernetworking-plugins)", plugin, cniBinDir))
		}
	}
	if err := checkBinary(binDir, "kubenode"); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return fmt.Errorf("a real node cannot run here: %w", errors.Join(errs...))
	}
	return nil
}

// lookPath finds a system tool also in the sbin folders a non-login root shell may lack.
func lookPath(name string) (string, error) {
	if p, err := exec.LookPath(name); err == nil {
		return p, nil
	}
	for _, dir := range []string{"/usr/sbin", "/sbin", "/usr/local/sbin"} {
		p := filepath.Join(dir, name)
		if info, err := os.Stat(p); err == nil && info.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s not found", name)
}
