// Package fleet starts a local fleet: one hub and N managed clusters, each a real kube-apiserver,
// etcd and kube-controller-manager (garbage collector and namespace controllers) on this machine,
// with Regent's and OCM's CRDs installed and every managed cluster registered on the hub as a
// ManagedCluster with its namespace. Integration tests and `regent quickstart` both use it, so a
// newcomer's first command and CI exercise the same code.
//
// Every process is tied to the one that started the fleet (the kernel's parent-death signal), so
// a test that dies — t.Fatal, os.Exit or SIGKILL — leaves no apiserver running, and the next
// fleet removes what a dead one left on disk.
package fleet
