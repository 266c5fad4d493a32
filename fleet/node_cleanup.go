package fleet

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// nodeStateFile records, before a node creates anything outside its folder, what cleanup must
// remove: a fleet that is SIGKILLed runs no Stop, and the next fleet's sweep reads this file.
const nodeStateFile = "node.json"

// bridgeMarker in a fleet root says the fleet created the pod bridge.
const bridgeMarker = "bridge"

type nodeState struct {
	// CgroupRoot is the node's cgroup (relative to each hierarchy) every pod runs under.
	CgroupRoot string `json:"cgroupRoot"`
	// Kubenode is the binary whose `kube-proxy --cleanup` removes the Service rules.
	Kubenode string `json:"kubenode"`
	// Sysctls are the host's values, before the node started, of the kernel settings the
	// kubelet, kube-proxy and the bridge plugin change; cleanup puts them back.
	Sysctls map[string]string `json:"sysctls"`
}

// nodeSysctls are what a node changes on the host: the kubelet's kernel tunables (it would leave
// a host that panics and reboots on an oops), kube-proxy's route_localnet, the bridge plugin's
// forwarding.
var nodeSysctls = []string{
	"net/ipv4/ip_forward", "net/ipv4/conf/all/route_localnet",
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

func readSysctls() map[string]string {
	values := map[string]string{}
	for _, k := range nodeSysctls {
		if v, err := os.ReadFile(filepath.Join("/proc/sys", k)); err == nil {
			values[k] = strings.TrimSpace(string(v))
		}
	}
	return values
}

func restoreSysctls(values map[string]string) error {
	var errs []error
	for k, v := range values {
		if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restore %s: %w", k, err))
		}
	}
	return errors.Join(errs...)
}

const cgroupMount = "/sys/fs/cgroup"

// cleanupNode removes what a node left in dir and on the host, whether it stopped or died:
// containers (every process in the node's cgroups), containerd and its shims, mounts under dir
// (rootfs, netns, volumes), the cgroups, and kube-proxy's iptables rules. Pods' veths go with
// their network namespaces. It runs only when dir holds a node state file.
func cleanupNode(dir string) error {
	data, err := os.ReadFile(filepath.Join(dir, nodeStateFile))
	if err != nil {
		return nil
	}
	var st nodeState
	if err := json.Unmarshal(data, &st); err != nil {
		return fmt.Errorf("node state %s: %w", dir, err)
	}
	var errs []error
	if err := killCgroupProcesses(st.CgroupRoot); err != nil {
		errs = append(errs, err)
	}
	sockets := shimSockets(dir)
	killUsers(dir) // containerd and its shims name the node's socket
	for _, s := range sockets {
		_ = os.Remove(s)
	}
	errs = append(errs, unmountUnder(dir), removeCgroups(st.CgroupRoot))
	errs = append(errs, cleanupRules(st.Kubenode), restoreSysctls(st.Sysctls))
	return errors.Join(errs...)
}

// kubeletChains are the iptables chains the kubelet makes (KUBE-FIREWALL hooked into INPUT and
// OUTPUT); kube-proxy --cleanup removes only its own.
var kubeletChains = []string{"KUBE-FIREWALL", "KUBE-KUBELET-CANARY", "KUBE-IPTABLES-HINT"}

// cleanupRules removes the Service rules kube-proxy wrote and the kubelet's chains, for IPv4 and
// IPv6. One real node per host, so no other node's rules are there.
func cleanupRules(kubenode string) error {
	var errs []error
	if kubenode != "" {
		if out, err := exec.Command(kubenode, "kube-proxy", "--cleanup").CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("kube-proxy --cleanup: %w: %s", err, tail(out)))
		}
	}
	for _, tool := range []string{"iptables", "ip6tables"} {
		bin, err := lookPath(tool)
		if err != nil {
			continue
		}
		for _, table := range []string{"filter", "nat", "mangle"} {
			for _, hook := range []string{"INPUT", "OUTPUT"} {
				for exec.Command(bin, "-w", "-t", table, "-D", hook, "-j", "KUBE-FIREWALL").Run() == nil {
				}
			}
			for _, chain := range kubeletChains {
				_ = exec.Command(bin, "-w", "-t", table, "-F", chain).Run()
				_ = exec.Command(bin, "-w", "-t", table, "-X", chain).Run()
			}
		}
	}
	return errors.Join(errs...)
}

// liveBridgeOwner is the root of another live fleet beside self that created the pod bridge, or "".
func liveBridgeOwner(self string) string {
	roots, _ := filepath.Glob(filepath.Join(filepath.Dir(self), rootPrefix+"*"))
	for _, root := range roots {
		if root == self {
			continue
		}
		if _, err := os.Stat(filepath.Join(root, bridgeMarker)); err != nil {
			continue
		}
		if fleetAlive(root) {
			return root
		}
	}
	return ""
}

// sweepHostLeftovers removes what dead fleets' nodes left on the host even when their roots are
// gone or half-removed: containers in and the cgroups of dead fleets' nodes, mounts under their roots,
// the Service and kubelet rules, and the bridge.
func sweepHostLeftovers(tempDir, kubenode string) {
	hierarchies, _ := os.ReadDir(cgroupMount)
	seen := map[string]bool{}
	for _, h := range hierarchies {
		groups, _ := os.ReadDir(filepath.Join(cgroupMount, h.Name()))
		for _, g := range groups {
			name := g.Name()
			if !g.IsDir() || seen[name] || !strings.HasPrefix(name, rootPrefix) {
				continue
			}
			seen[name] = true
			root, _, ok := strings.Cut(name[len(rootPrefix):], "-")
			if ok && !fleetAlive(filepath.Join(tempDir, rootPrefix+root)) {
				_ = killCgroupProcesses(name)
				_ = removeCgroups(name)
			}
		}
	}
	_ = unmountMatching(func(p string) bool {
		rest, ok := strings.CutPrefix(p, filepath.Join(tempDir, rootPrefix))
		if !ok {
			return false
		}
		root, _, _ := strings.Cut(rest, "/")
		return !fleetAlive(filepath.Join(tempDir, rootPrefix+root))
	})
	_ = cleanupRules(kubenode)
	_ = deleteBridge()
	removeStaleShimSockets()
}

// removeStaleShimSockets removes shim sockets nothing listens on (a connection is refused): a
// killed shim's, whichever containerd it served.
func removeStaleShimSockets() {
	entries, _ := os.ReadDir(shimSocketDir)
	for _, e := range entries {
		path := filepath.Join(shimSocketDir, e.Name())
		conn, err := net.DialTimeout("unix", path, time.Second)
		if err == nil {
			conn.Close()
			continue
		}
		if errors.Is(err, syscall.ECONNREFUSED) {
			_ = os.Remove(path)
		}
	}
}

// shimSocketDir is where containerd 1.6 puts its shims' sockets whatever its state folder: a
// shim removes its own only when containerd shuts it down, which a killed node never does.
const shimSocketDir = "/run/containerd/s"

// shimSockets are the sockets of the node's live shims, named as containerd names them: the
// SHA-256 of <containerd address>/<namespace>/<id>, from the shim's command line.
func shimSockets(dir string) []string {
	var sockets []string
	for _, pid := range ProcessesUsing(dir) {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		flag := map[string]string{}
		for i := 0; i+1 < len(args); i++ {
			if strings.HasPrefix(args[i], "-") {
				flag[strings.TrimLeft(args[i], "-")] = args[i+1]
			}
		}
		if flag["address"] == "" || flag["namespace"] == "" || flag["id"] == "" {
			continue
		}
		sum := sha256.Sum256([]byte(filepath.Join(flag["address"], flag["namespace"], flag["id"])))
		sockets = append(sockets, filepath.Join(shimSocketDir, hex.EncodeToString(sum[:])))
	}
	return sockets
}

// cgroupDirs are the node's cgroup folders in every mounted hierarchy (v1 controllers, the
// unified one), deepest first.
func cgroupDirs(root string) []string {
	if root == "" || strings.Contains(root, "..") {
		return nil
	}
	var dirs []string
	hierarchies, _ := os.ReadDir(cgroupMount)
	for _, h := range hierarchies {
		base := filepath.Join(cgroupMount, h.Name(), root)
		_ = filepath.WalkDir(base, func(path string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, path)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	return dirs
}

// killCgroupProcesses SIGKILLs every process in the node's cgroups until none is left: the
// containers, which no parent-death signal reaches (their shims are daemons).
func killCgroupProcesses(root string) error {
	deadline := time.Now().Add(20 * time.Second)
	for {
		alive := 0
		for _, d := range cgroupDirs(root) {
			procs, err := os.ReadFile(filepath.Join(d, "cgroup.procs"))
			if err != nil {
				continue
			}
			for _, f := range strings.Fields(string(procs)) {
				if pid, err := strconv.Atoi(f); err == nil && pid != os.Getpid() {
					alive++
					_ = syscall.Kill(pid, syscall.SIGKILL)
				}
			}
		}
		if alive == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d processes still in cgroup %s", alive, root)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func removeCgroups(root string) error {
	var errs []error
	for _, d := range cgroupDirs(root) {
		var err error
		for range 50 { // a cgroup whose last process just died can be busy for a moment
			if err = syscall.Rmdir(d); err == nil || errors.Is(err, syscall.ENOENT) {
				err = nil
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("remove cgroup %s: %w", d, err))
		}
	}
	return errors.Join(errs...)
}

// unmountUnder detaches every mount below dir, deepest first, so removing dir deletes only the
// node's own files (never through a mount into an image's layers or a volume).
func unmountUnder(dir string) error {
	return unmountMatching(func(p string) bool { return strings.HasPrefix(p, dir+"/") })
}

func unmountMatching(match func(string) bool) error {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return err
	}
	defer f.Close()
	var points []string
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 5 {
			continue
		}
		if p := unescapeMount(fields[4]); match(p) {
			points = append(points, p)
		}
	}
	sort.Slice(points, func(i, j int) bool { return len(points[i]) > len(points[j]) })
	var errs []error
	for _, p := range points {
		if err := syscall.Unmount(p, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
			errs = append(errs, fmt.Errorf("unmount %s: %w", p, err))
		}
	}
	return errors.Join(errs...)
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// sweepNodes cleans what a dead fleet's nodes and pod bridge left on the host.
func sweepNodes(root string) {
	states, _ := filepath.Glob(filepath.Join(root, "*", "node", nodeStateFile))
	for _, s := range states {
		_ = cleanupNode(filepath.Dir(s))
	}
	// Cgroups are named after the root: found even when an older sweep removed the state file.
	groups, _ := filepath.Glob(filepath.Join(cgroupMount, "*", filepath.Base(root)+"-*"))
	for _, g := range groups {
		_ = killCgroupProcesses(filepath.Base(g))
		_ = removeCgroups(filepath.Base(g))
	}
	if _, err := os.Stat(filepath.Join(root, bridgeMarker)); err == nil {
		_ = deleteBridge()
	}
}

func tail(b []byte) string {
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return strings.TrimSpace(string(b))
}
