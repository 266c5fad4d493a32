package fleet

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clusterv1 "open-cluster-management.io/api/cluster/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
)

// ocmJoinTimeout bounds one cluster's join: bootstrap, CSR, acceptance, first heartbeat.
const ocmJoinTimeout = 3 * time.Minute

// OCMHubKubeconfigDir is where the registration agent of c writes the hub kubeconfig and
// certificate it obtained (the klusterlet's /spoke/hub-kubeconfig); the work agent reads it.
func (c *Cluster) OCMHubKubeconfigDir() string { return filepath.Join(c.Dir, "ocm", "hub-kubeconfig") }

// joinOCM does for c what `clusteradm join` and `clusteradm accept` do: OCM's registration agent
// starts on c with a bootstrap kubeconfig (a token of the hub's bootstrap ServiceAccount),
// creates c's ManagedCluster and a CSR; the CSR is approved (kube-controller-manager signs it)
// and the cluster accepted. Once the cluster is Joined and Available, OCM's work agent starts.
func (f *Fleet) joinOCM(ctx context.Context, h *ocmHub, c *Cluster) error {
	ctx, cancel := context.WithTimeout(ctx, ocmJoinTimeout)
	defer cancel()
	hubKube, err := kubernetes.NewForConfig(f.Hub.Config)
	if err != nil {
		return err
	}
	spokeKube, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return err
	}
	for _, ns := range []string{OCMAgentNamespace, OCMAddonNamespace} {
		if _, err := spokeKube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("%s: agent namespace: %w", c.Name, err)
		}
	}
	ttl := int64(24 * time.Hour / time.Second)
	tr, err := hubKube.CoreV1().ServiceAccounts(OCMBootstrapNamespace).CreateToken(ctx, OCMBootstrapServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttl}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("%s: bootstrap token: %w", c.Name, err)
	}
	dir := filepath.Join(c.Dir, "ocm")
	if err := os.MkdirAll(c.OCMHubKubeconfigDir(), 0o700); err != nil {
		return err
	}
	bootstrap := rest.AnonymousClientConfig(f.Hub.Config)
	bootstrap.BearerToken = tr.Status.Token
	bootstrapFile := filepath.Join(dir, "bootstrap-kubeconfig")
	if err := WriteKubeconfig(bootstrapFile, bootstrap); err != nil {
		return err
	}
	listen, err := FreeAddr()
	if err != nil {
		return err
	}
	if _, err := f.startOCM("ocm-registration-agent-"+c.Name, h.bin, "registration", "agent",
		"--kubeconfig="+c.Kubeconfig, "--cluster-name="+c.Name, "--bootstrap-kubeconfig="+bootstrapFile,
		"--hub-kubeconfig-dir="+c.OCMHubKubeconfigDir(), "--spoke-external-server-urls="+c.Config.Host,
		"--cluster-healthcheck-period=10s", "--disable-leader-election", "--namespace="+OCMAgentNamespace,
		"--listen="+listen); err != nil {
		return err
	}
	hub, err := client.New(f.Hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	if err := accept(ctx, hub, hubKube, c); err != nil {
		return err
	}
	if err := waitJoined(ctx, hub, c.Name); err != nil {
		return err
	}
	if listen, err = FreeAddr(); err != nil {
		return err
	}
	kubeconfig := filepath.Join(c.OCMHubKubeconfigDir(), "kubeconfig")
	_, err = f.startOCM("ocm-work-agent-"+c.Name, h.bin, "work", "agent",
		"--kubeconfig="+c.Kubeconfig, "--spoke-cluster-name="+c.Name, "--hub-kubeconfig="+kubeconfig,
		"--hub-kubeconfig-dir="+c.OCMHubKubeconfigDir(), "--workload-source-config="+kubeconfig,
		"--disable-leader-election", "--namespace="+OCMAgentNamespace, "--listen="+listen)
	return err
}

// accept approves the agent's pending registration CSRs and sets hubAcceptsClient with the
// cluster's labels, as `clusteradm accept` does.
func accept(ctx context.Context, hub client.Client, hubKube kubernetes.Interface, c *Cluster) error {
	var approved bool
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		csrs, err := hubKube.CertificatesV1().CertificateSigningRequests().List(ctx, metav1.ListOptions{
			LabelSelector: clusterv1.ClusterNameLabelKey + "=" + c.Name})
		if err != nil {
			return false, nil
		}
		for i := range csrs.Items {
			csr := &csrs.Items[i]
			if len(csr.Status.Conditions) > 0 {
				approved = approved || isApproved(csr)
				continue
			}
			csr.Status.Conditions = append(csr.Status.Conditions, certificatesv1.CertificateSigningRequestCondition{
				Type: certificatesv1.CertificateApproved, Status: corev1.ConditionTrue,
				Reason: "RegentFleetAccept", Message: "approved by the fleet, as clusteradm accept does"})
			if _, err := hubKube.CertificatesV1().CertificateSigningRequests().UpdateApproval(ctx, csr.Name, csr, metav1.UpdateOptions{}); err != nil {
				return false, nil
			}
			approved = true
		}
		if !approved {
			return false, nil
		}
		mc := &clusterv1.ManagedCluster{}
		if err := hub.Get(ctx, client.ObjectKey{Name: c.Name}, mc); err != nil {
			return false, nil
		}
		patch := client.MergeFrom(mc.DeepCopy())
		mc.Spec.HubAcceptsClient = true
		if mc.Labels == nil {
			mc.Labels = map[string]string{}
		}
		for k, v := range c.Labels {
			mc.Labels[k] = v
		}
		return hub.Patch(ctx, mc, patch) == nil, nil
	})
	if err != nil {
		return fmt.Errorf("accept %s: no registration CSR and ManagedCluster from its agent: %w", c.Name, err)
	}
	return nil
}

func isApproved(csr *certificatesv1.CertificateSigningRequest) bool {
	for _, cond := range csr.Status.Conditions {
		if cond.Type == certificatesv1.CertificateApproved && cond.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// waitJoined waits until OCM reports the cluster Joined and Available and its namespace exists.
func waitJoined(ctx context.Context, hub client.Client, name string) error {
	var last *clusterv1.ManagedCluster
	err := wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		mc := &clusterv1.ManagedCluster{}
		if err := hub.Get(ctx, client.ObjectKey{Name: name}, mc); err != nil {
			return false, nil
		}
		last = mc
		if !meta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionJoined) ||
			!meta.IsStatusConditionTrue(mc.Status.Conditions, clusterv1.ManagedClusterConditionAvailable) {
			return false, nil
		}
		return hub.Get(ctx, client.ObjectKey{Name: name}, &corev1.Namespace{}) == nil, nil
	})
	if err != nil {
		var conds []metav1.Condition
		if last != nil {
			conds = last.Status.Conditions
		}
		return fmt.Errorf("%s did not become Joined and Available (conditions %v): %w", name, conds, err)
	}
	return nil
}
