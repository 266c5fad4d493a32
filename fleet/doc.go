// Package fleet starts a local fleet: one hub and N managed clusters, each a real kube-apiserver,
// etcd and kube-controller-manager (garbage collector and namespace controllers) on this machine,
// with Regent's and OCM's CRDs installed and every managed cluster registered on the hub as a
// ManagedCluster with its namespace. Integration tests and `regent quickstart` both use it, so a
// newcomer's first command and CI exercise the same code.
//
// With Options.OCMAgents the registration is OCM's own instead: OCM's registration hub
// controller, addon manager and addon conversion webhook run on the hub, and each managed cluster
// joins as `clusteradm join` does — its registration agent starts with a bootstrap ServiceAccount
// token, its CSR is approved and signed by the hub's kube-controller-manager (with the client CA
// the hub apiserver trusts), the cluster is accepted, and OCM's work agent applies its
// ManifestWorks. Addons then get hub certificates and Available conditions from OCM's code.
//
// Every process is tied to the one that started the fleet (the kernel's parent-death signal), so
// a test that dies — t.Fatal, os.Exit or SIGKILL — leaves no apiserver running, and the next
// fleet removes what a dead one left on disk.
//
// A managed cluster may have a real node (ClusterSpec.RealNode, root only; CheckRealNode says what
// is missing): a private containerd with runc and a CNI bridge, a kubelet, kube-proxy in iptables
// mode and kube-scheduler (one binary, kubenode, from `make testbin`), and the workload controllers
// in its kube-controller-manager. Its apiserver and the hub's serve on the bridge's gateway
// (NodeAddress), so pods reach both — the `kubernetes` Service through kube-proxy, webhooks are
// dialled at their endpoints (--enable-aggregator-routing). Images are imported from tarballs
// (Options.NodeImages), never pulled. Stop, or the next fleet's sweep after a SIGKILL, removes
// the containers (by the node's cgroups), mounts, cgroups, iptables chains and the bridge.
package fleet
