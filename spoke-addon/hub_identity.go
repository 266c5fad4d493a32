package spokeaddon

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"regent.dev/regent/addonidentity"
)

// tokenRoleBinding grants HubRole to the ServiceAccount IssueHubIdentity issues tokens for.
const tokenRoleBinding = "regent-addon-token"

// IssueHubIdentity gives a cluster's addon its hub identity: a ServiceAccount in the cluster
// namespace bound to HubRole, and a token for it from the TokenRequest API. It returns a client
// configuration for the hub that carries only that token. hubAdmin must be allowed to create
// those objects and tokens.
func IssueHubIdentity(ctx context.Context, hubAdmin *rest.Config, clusterName string, ttlSeconds int64) (*rest.Config, error) {
	kube, err := kubernetes.NewForConfig(hubAdmin)
	if err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "regent-addon", Namespace: clusterName}}
	if _, err := kube.CoreV1().ServiceAccounts(clusterName).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("addon service account in %s: %w", clusterName, err)
	}
	if _, err := kube.RbacV1().Roles(clusterName).Create(ctx, addonidentity.HubRole(clusterName), metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("addon role in %s: %w", clusterName, err)
	}
	subject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: clusterName}
	// A binding of its own: the addon manager owns HubRoleBinding's name and, once the cluster's
	// ManagedClusterAddOn exists, rewrites its subjects to the identities OCM issues, which would
	// lock this token out.
	binding := addonidentity.HubRoleBinding(clusterName, subject)
	binding.Name = tokenRoleBinding
	if _, err := kube.RbacV1().RoleBindings(clusterName).Create(ctx, binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("addon role binding in %s: %w", clusterName, err)
	}
	tr, err := kube.CoreV1().ServiceAccounts(clusterName).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &ttlSeconds}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("addon token for %s: %w", clusterName, err)
	}
	cfg := rest.AnonymousClientConfig(hubAdmin)
	cfg.BearerToken = tr.Status.Token
	return cfg, nil
}
