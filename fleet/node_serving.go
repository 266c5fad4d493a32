package fleet

import (
	"net"
	"path/filepath"

	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// servingOptions change how a cluster's apiserver serves when pods call it.
type servingOptions struct {
	// address is where the apiserver binds and what it advertises (the `kubernetes` Service's
	// endpoint); loopback when empty.
	address string
	// pods: the cluster runs real pods. Its serving certificate names the `kubernetes` Service,
	// the ServiceAccount admission plugin mounts tokens into pods (envtest turns it off), and
	// webhooks called through a Service are dialled at their endpoints (there is no kube-proxy
	// on the apiserver's side of the Service rules in every setup; this needs none).
	pods bool
}

func (s servingOptions) apply(api *envtest.APIServer) error {
	if s.address == "" {
		return nil
	}
	port, err := FreePort(s.address)
	if err != nil {
		return err
	}
	// envtest picks a loopback address unless both are set.
	api.SecureServing.Address, api.SecureServing.Port = s.address, port
	if !s.pods {
		return nil
	}
	ca, err := writePodServingCerts(api.CertDir, []net.IP{net.ParseIP(s.address), net.ParseIP(kubernetesServiceIP)})
	if err != nil {
		return err
	}
	api.SecureServing.CA = ca
	args := api.Configure()
	args.Set("disable-admission-plugins", "")
	args.Set("enable-aggregator-routing", "true")
	args.Set("service-cluster-ip-range", serviceCIDR)
	args.Set("advertise-address", s.address)
	return nil
}

// podControllerArgs are kube-controller-manager's flags for a cluster with real pods: the
// workload controllers, ServiceAccounts and their tokens, the root CA every namespace's
// kube-root-ca.crt (part of each pod's projected token volume) carries, volume binding, and
// the node lifecycle controller, which lifts the not-ready taint a kubelet registers with.
// --controllers is a list flag: this one adds to the garbage collector and namespace controllers.
func (s servingOptions) podControllerArgs(certDir string) []string {
	return []string{
		"--controllers=deployment-controller,replicaset-controller,statefulset-controller," +
			"endpoints-controller,endpointslice-controller,serviceaccount-controller," +
			"serviceaccount-token-controller,root-ca-certificate-publisher-controller," +
			"persistentvolume-binder-controller,persistentvolume-protection-controller," +
			"persistentvolumeclaim-protection-controller,persistentvolume-attach-detach-controller," +
			"disruption-controller,node-lifecycle-controller",
		"--root-ca-file=" + filepath.Join(certDir, "ca.crt"),
		"--service-account-private-key-file=" + filepath.Join(certDir, "sa-signer.key"),
		"--use-service-account-credentials=false",
	}
}
