package fleet

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
)

// register creates the ManagedCluster and its namespace on the hub, as OCM's registration
// controller would once a cluster is accepted.
func register(ctx context.Context, hub *rest.Config, c *Cluster) error {
	cl, err := client.New(hub, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	mc := &clusterv1.ManagedCluster{
		ObjectMeta: metav1.ObjectMeta{Name: c.Name, Labels: c.Labels},
		Spec: clusterv1.ManagedClusterSpec{
			HubAcceptsClient: true,
			ManagedClusterClientConfigs: []clusterv1.ClientConfig{{
				URL:      c.Config.Host,
				CABundle: c.Config.CAData,
			}},
		},
	}
	if err := cl.Create(ctx, mc); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register %s: %w", c.Name, err)
	}
	// Labelled as OCM's registration labels the namespace it creates for an accepted cluster: the
	// hub's admission policies recognise cluster namespaces by it.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: c.Name, Labels: map[string]string{clusterv1.ClusterNameLabelKey: c.Name}}}
	if err := cl.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("namespace %s: %w", c.Name, err)
	}
	return nil
}
