// Package realnode is the end-to-end test on a real node: a managed cluster of the local fleet
// with containerd, a kubelet, kube-proxy and kube-scheduler (fleet.ClusterSpec.RealNode), on
// which Regent's image runs as pods — the spoke addon's Deployment as the addon delivers it and
// a PolicyServer's StatefulSet — with probes, volumes, ServiceAccount tokens and RBAC in the pod,
// and the kube-apiserver calling the policy server's webhook through its Service.
//
// It needs root, containerd, runc, the CNI plugins, iptables and conntrack (`apt-get install
// containerd runc containernetworking-plugins iptables conntrack`) and `make testbin`'s kubenode.
// Without them it skips and says what is missing, unless REGENT_REAL_NODE=1 (CI), which makes a
// missing prerequisite a failure.
package realnode
