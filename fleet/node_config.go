package fleet

import (
	"fmt"
	"os"
	"path/filepath"
)

// The settings below are what this kind of VM needs (docs: DESIGN.md "Known technical facts"):
// a cgroup v1 host with a unified mount (kubelet failCgroupV1: false, cgroupfs driver, runc not
// crun), and a kernel that refuses a negative oom_score_adj (containerd
// restrict_oom_score_adj, kubelet oomScoreAdj 0), else every sandbox fails with runc's "can't
// get final child's PID from pipe".

// containerdConfig keeps every path of containerd under the node's folder (its netns mounts
// too), so a node leaves nothing in /var/lib or /run/containerd and cleanup finds it all.
func containerdConfig(n *Node, sandboxImage string) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.zfs", "io.containerd.tracing.processor.v1.otlp"]

[grpc]
  address = %q

[ttrpc]
  address = ""

[debug]
  address = ""

[metrics]
  address = ""

[plugins."io.containerd.internal.v1.opt"]
  path = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
`, n.path("containerd", "root"), n.path("containerd", "state"), n.socket(), n.path("containerd", "opt"),
		sandboxImage, n.path("containerd", "runc"), cniBinDir, n.path("cni", "net.d"))
}

// cniConfig attaches pods to the fleet's bridge, addresses from host-local kept under the node's
// folder; no masquerading (pods talk only to the host and each other).
func cniConfig(n *Node) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "regent-pods",
  "plugins": [{
    "type": "bridge",
    "bridge": %q,
    "isGateway": true,
    "ipMasq": false,
    "hairpinMode": true,
    "ipam": {
      "type": "host-local",
      "dataDir": %q,
      "ranges": [[{"subnet": %q, "gateway": %q}]],
      "routes": [{"dst": "0.0.0.0/0"}]
    }
  }]
}
`, nodeBridge, n.path("cni", "ipam"), podSubnet, podGateway)
}

// kubeletConfig: pods' cgroups under the node's own cgroup root (cleanup removes that tree), the
// kubelet's server on the gateway on a free port, and eviction and image GC thresholds a busy
// test VM's disk does not trip.
func kubeletConfig(n *Node, port string) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %q
port: %s
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: false}
  x509: {}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: %q
cgroupDriver: cgroupfs
cgroupRoot: %q
failCgroupV1: false
failSwapOn: false
oomScoreAdj: 0
maxPods: 40
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard:
  memory.available: "1Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
staticPodPath: ""
registerNode: true
podLogsDir: %q
`, podGateway, port, "unix://"+n.socket(), "/"+n.cgroupRoot, n.path("pod-logs"))
}

// proxyConfig: kube-proxy in iptables mode, Services answering on the host for the pod subnet
// (the `kubernetes` Service DNATs to the apiserver on the gateway); it leaves the host's
// conntrack limits alone and serves no health or metrics port.
func proxyConfig(n *Node, kubeconfig string) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
clusterCIDR: %q
bindAddress: %q
healthzBindAddress: ""
metricsBindAddress: ""
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
`, kubeconfig, n.Name, podSubnet, podGateway)
}

func (n *Node) writeConfigs(sandboxImage, kubeletPort, kubeconfig string) error {
	for _, d := range [][]string{{"containerd", "root"}, {"containerd", "state"}, {"containerd", "opt"},
		{"cni", "net.d"}, {"cni", "ipam"}, {"kubelet"}, {"pod-logs"}} {
		if err := os.MkdirAll(n.path(d...), 0o700); err != nil {
			return err
		}
	}
	files := map[string]string{
		n.path("containerd", "config.toml"):          containerdConfig(n, sandboxImage),
		n.path("cni", "net.d", "10-regent.conflist"): cniConfig(n),
		n.path("kubelet.yaml"):                       kubeletConfig(n, kubeletPort),
		n.path("proxy.yaml"):                         proxyConfig(n, kubeconfig),
	}
	for path, content := range files {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (n *Node) path(elem ...string) string { return filepath.Join(append([]string{n.Dir}, elem...)...) }

// socket is short: a unix socket path is limited to 108 bytes.
func (n *Node) socket() string { return n.path("c.sock") }
