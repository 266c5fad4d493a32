package fleet

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/crds"
	"regent.dev/regent/api/scheme"
)

// OCM's own hub and agent components, run from the `ocm` binary hack/testbin.sh builds from the
// pinned open-cluster-management.io/ocm module, in place of the default fleet's stand-in
// (register.go): clusters join with a bootstrap token and a CSR, as `clusteradm join` does.
const (
	// OCMBinary dispatches to OCM's commands: `ocm registration|work|addon|placement ...`.
	OCMBinary = "ocm"
	// OCMHubNamespace is where OCM's hub controllers keep their events (cluster-manager's
	// open-cluster-management-hub).
	OCMHubNamespace = "open-cluster-management-hub"
	// OCMBootstrapNamespace holds the bootstrap ServiceAccount clusters join with.
	OCMBootstrapNamespace = "open-cluster-management"
	// OCMBootstrapServiceAccount is the identity of bootstrap kubeconfigs, bound to
	// OCMBootstrapClusterRole (what `clusteradm init` creates).
	OCMBootstrapServiceAccount = "agent-registration-bootstrap"
	// OCMBootstrapClusterRole lets a joining agent create its ManagedCluster and CSR.
	OCMBootstrapClusterRole = "open-cluster-management:bootstrap"
	// OCMAgentNamespace is where the registration agent keeps its hub kubeconfig Secret on
	// each managed cluster (the klusterlet's namespace).
	OCMAgentNamespace = "open-cluster-management-agent"
	// OCMHubKubeconfigSecret is that Secret's name.
	OCMHubKubeconfigSecret = "hub-kubeconfig-secret"
	// OCMAddonNamespace is where addons install on each managed cluster by default; the
	// klusterlet creates it, and so does the fleet.
	OCMAddonNamespace = "open-cluster-management-agent-addon"
)

// ocmCRDs are the hub's and spokes' CRDs when OCM's agents run.
func ocmCRDs(hub, spoke []*apiextensionsv1.CustomResourceDefinition) (hubCRDs, spokeCRDs []*apiextensionsv1.CustomResourceDefinition, err error) {
	extra, err := crds.OCMAgents()
	if err != nil {
		return nil, nil, err
	}
	return append(slices.Clone(hub), extra...), append(slices.Clone(spoke), extra...), nil
}

// convertedCRDs are the CRDs served in v1alpha1 (which OCM's components read) and v1beta1 (which
// addon-framework writes), converted by OCM's webhook.
var convertedCRDs = []string{"managedclusteraddons.addon.open-cluster-management.io", "clustermanagementaddons.addon.open-cluster-management.io"}

// ocmHub is what the hub side of OCM's agents needs once the hub apiserver runs.
type ocmHub struct {
	bin         string
	webhookDir  string
	webhookAddr string // host:port
	webhookCA   []byte
}

// prepareOCMHub finds the ocm binary and writes the conversion webhook's serving certificate.
func prepareOCMHub(root, binDir string) (*ocmHub, error) {
	bin, err := Binary(binDir, OCMBinary)
	if err != nil {
		return nil, err
	}
	h := &ocmHub{bin: bin, webhookDir: filepath.Join(root, "ocm-webhook")}
	if err := os.MkdirAll(h.webhookDir, 0o700); err != nil {
		return nil, err
	}
	if h.webhookAddr, err = FreeAddr(); err != nil {
		return nil, err
	}
	if h.webhookCA, err = writeServingCert(h.webhookDir); err != nil {
		return nil, err
	}
	return h, nil
}

// startOCMHub runs OCM's addon conversion webhook, registration hub controller and addon manager,
// and creates the bootstrap identity clusters join with.
func (f *Fleet) startOCMHub(ctx context.Context, h *ocmHub) error {
	_, port, _ := net.SplitHostPort(h.webhookAddr)
	if _, err := f.startOCM("ocm-addon-conversion-webhook", h.bin, "addon", "conversion-webhook",
		"--kubeconfig="+f.Hub.Kubeconfig, "--port="+port, "--certdir="+h.webhookDir); err != nil {
		return err
	}
	cl, err := client.New(f.Hub.Config, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	if err := createBootstrapIdentity(ctx, cl); err != nil {
		return err
	}
	if err := h.convertAddons(ctx, cl); err != nil {
		return err
	}
	for _, c := range []struct{ name, component, command string }{
		{"ocm-registration-controller", "registration", "controller"},
		{"ocm-addon-manager", "addon", "manager"},
	} {
		listen, err := FreeAddr()
		if err != nil {
			return err
		}
		if _, err := f.startOCM(c.name, h.bin, c.component, c.command, "--kubeconfig="+f.Hub.Kubeconfig,
			"--disable-leader-election", "--namespace="+OCMHubNamespace, "--listen="+listen); err != nil {
			return err
		}
	}
	return nil
}

// convertAddons waits for the conversion webhook to listen and points the addon CRDs at it, as
// OCM's cluster-manager operator does. The hub's CRDs cannot name it from the start: envtest
// drops the conversion of every CRD whose types its own scheme cannot convert.
func (h *ocmHub) convertAddons(ctx context.Context, cl client.Client) error {
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		conn, err := net.DialTimeout("tcp", h.webhookAddr, time.Second)
		if err != nil {
			return false, nil
		}
		conn.Close()
		return true, nil
	}); err != nil {
		return fmt.Errorf("OCM's addon conversion webhook at %s: %w", h.webhookAddr, err)
	}
	url := "https://" + h.webhookAddr + "/convert"
	for _, name := range convertedCRDs {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, crd); err != nil {
			return err
		}
		patch := client.MergeFrom(crd.DeepCopy())
		crd.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{
			Strategy: apiextensionsv1.WebhookConverter,
			Webhook: &apiextensionsv1.WebhookConversion{
				ClientConfig:             &apiextensionsv1.WebhookClientConfig{URL: &url, CABundle: h.webhookCA},
				ConversionReviewVersions: []string{"v1", "v1beta1"},
			},
		}
		if err := cl.Patch(ctx, crd, patch); err != nil {
			return fmt.Errorf("conversion webhook of %s: %w", name, err)
		}
	}
	return nil
}

// createBootstrapIdentity is what `clusteradm init` creates for `clusteradm join`: a
// ServiceAccount allowed to create ManagedClusters and CSRs, and the hub namespace.
func createBootstrapIdentity(ctx context.Context, cl client.Client) error {
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OCMHubNamespace}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: OCMBootstrapNamespace}},
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: OCMBootstrapServiceAccount, Namespace: OCMBootstrapNamespace}},
		&rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: OCMBootstrapClusterRole},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}},
				{APIGroups: []string{"certificates.k8s.io"}, Resources: []string{"certificatesigningrequests"}, Verbs: []string{"create", "get", "list", "watch"}},
				{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclusters"}, Verbs: []string{"get", "create", "list", "watch"}},
				{APIGroups: []string{"cluster.open-cluster-management.io"}, Resources: []string{"managedclustersets/join"}, Verbs: []string{"create"}},
			},
		},
		&rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: OCMBootstrapClusterRole + ":agent-registration"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: OCMBootstrapClusterRole},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: OCMBootstrapServiceAccount, Namespace: OCMBootstrapNamespace}},
		},
	}
	for _, o := range objs {
		if err := cl.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("OCM bootstrap identity %s: %w", o.GetName(), err)
		}
	}
	return nil
}

// startOCM runs one of OCM's commands. library-go writes a self-signed serving certificate into
// a new temporary folder on every start and never removes it: TMPDIR inside the fleet's root
// makes Stop remove them.
func (f *Fleet) startOCM(name, bin string, args ...string) (*Process, error) {
	tmp := filepath.Join(f.Dir, "tmp")
	if err := os.MkdirAll(tmp, 0o700); err != nil {
		return nil, err
	}
	return f.startProcess(name, bin, []string{"TMPDIR=" + tmp}, args...)
}
