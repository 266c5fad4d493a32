// Package scheme is the runtime.Scheme with every kind Regent reads or writes: Kubernetes' built-in
// kinds, CRDs, OCM's cluster and addon kinds, and Regent's own.
package scheme

import (
	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	addonv1alpha1 "open-cluster-management.io/api/addon/v1alpha1"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	clusterv1alpha1 "open-cluster-management.io/api/cluster/v1alpha1"
	clusterv1beta1 "open-cluster-management.io/api/cluster/v1beta1"
	clusterv1beta2 "open-cluster-management.io/api/cluster/v1beta2"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	policyv1 "regent.dev/regent/api/policy/v1"
	policyv1beta1 "regent.dev/regent/api/policy/v1beta1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
)

// Scheme knows every kind Regent uses.
var Scheme = runtime.NewScheme()

func init() {
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		apiextensionsv1.AddToScheme,
		clusterv1.Install,
		clusterv1alpha1.Install,
		clusterv1beta1.Install,
		clusterv1beta2.Install,
		addonv1alpha1.Install,
		policyv1.AddToScheme,
		policyv1beta1.AddToScheme,
		kubewardenv1.AddToScheme,
		reportsv1alpha1.AddToScheme,
		openreportsv1alpha1.AddToScheme,
	} {
		utilruntime.Must(add(Scheme))
	}
}
