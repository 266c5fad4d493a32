package admissionpolicy

import (
	"context"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
)

// conditionRBACReady says whether the policy server's replicas may do what they must.
const conditionRBACReady = "RBACReady"

// recheckUnknownKinds is how soon a PolicyServer whose policies name unknown kinds looks again:
// installing a CRD sends the controller no event.
const recheckUnknownKinds = 30 * time.Second

// applyRBAC gives the policy server's replicas their identity and exactly the access they need,
// and says so in a condition; requeue is set when unknown kinds should be looked up again.
func (r *policyServerReconciler) applyRBAC(ctx context.Context, ps *kubewardenv1.PolicyServer) (cond metav1.Condition, requeue time.Duration, err error) {
	cond = metav1.Condition{Type: conditionRBACReady, Status: metav1.ConditionFalse, Reason: "ApplyFailed"}
	resources, unknown, err := r.applyIdentity(ctx, ps)
	if err != nil {
		cond.Message = err.Error()
		return cond, 0, err
	}
	sa := serviceAccountOf(ps)
	if sa != serviceAccountName(ps.Name) && r.serviceAccountMissing(ctx, sa) {
		cond.Reason = "ServiceAccountMissing"
		cond.Message = fmt.Sprintf("ServiceAccount %s/%s named by spec.serviceAccountName does not exist; its replicas cannot start", r.namespace, sa)
		return cond, 0, nil
	}
	reads := "no resources"
	if len(resources) > 0 {
		names := make([]string, len(resources))
		for i, gr := range resources {
			names[i] = gr.String()
		}
		reads = strings.Join(names, ", ")
	}
	granted := fmt.Sprintf("ServiceAccount %s/%s may run replicas (Role %s) and its context-aware policies may read %s (ClusterRole %s); "+
		"ServiceAccount %[1]s/%[6]s may lead, sign and run the background scan (Role and ClusterRole %[6]s)",
		r.namespace, sa, serverObjectName(ps.Name), reads, contextRoleName(ps.Name), leaderIdentityName(ps.Name))
	if len(unknown) > 0 {
		cond.Reason = "UnknownContextAwareResource"
		cond.Message = "skipped kinds the cluster does not serve: " + strings.Join(unknown, "; ") + ". " + granted
		return cond, recheckUnknownKinds, nil
	}
	cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "Granted", granted
	return cond, 0, nil
}

// applyIdentity writes the ServiceAccount (unless the user brings one), the Role and
// ClusterRole, and their bindings, all owned by the PolicyServer: it is cluster-scoped, so the
// garbage collector removes even the cluster-scoped ones with it, and no finalizer is needed.
func (r *policyServerReconciler) applyIdentity(ctx context.Context, ps *kubewardenv1.PolicyServer) ([]schema.GroupResource, []string, error) {
	labels := map[string]string{AppNameLabel: AppName, kubewardenv1.PolicyServerLabel: ps.Name}
	name := serverObjectName(ps.Name)
	sa := serviceAccountOf(ps)
	if sa == serviceAccountName(ps.Name) {
		if err := r.ensure(ctx, ps, &corev1.ServiceAccount{ObjectMeta: r.meta(sa, labels)}, func(client.Object) {}); err != nil {
			return nil, nil, err
		}
	} else if err := r.dropOwnServiceAccount(ctx, ps); err != nil {
		return nil, nil, err
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa, Namespace: r.namespace}}

	leases := &coordinationv1.LeaseList{}
	if err := r.nsReader.List(ctx, leases, client.InNamespace(r.namespace)); err != nil {
		return nil, nil, fmt.Errorf("list Leases: %w", err)
	}
	existing := make([]string, len(leases.Items))
	for i, l := range leases.Items {
		existing[i] = l.Name
	}
	rules := replicaRules(ps.Name, replicaLeaseNames(ps.Name, ps.Spec.Replicas, existing))
	if err := r.ensure(ctx, ps, &rbacv1.Role{ObjectMeta: r.meta(name, labels)}, func(o client.Object) {
		o.(*rbacv1.Role).Rules = rules
	}); err != nil {
		return nil, nil, err
	}
	if err := r.ensure(ctx, ps, &rbacv1.RoleBinding{ObjectMeta: r.meta(name, labels)}, func(o client.Object) {
		b := o.(*rbacv1.RoleBinding)
		b.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
		b.Subjects = subjects
	}); err != nil {
		return nil, nil, err
	}

	wants, err := r.contextAwareWants(ctx, ps.Name)
	if err != nil {
		return nil, nil, err
	}
	resources, unknown := resolveResources(r.mapper, wants)
	scanned, err := r.backgroundAudited(ctx, ps.Name)
	if err != nil {
		return nil, nil, err
	}
	ctxName := contextRoleName(ps.Name)
	cluster := metav1.ObjectMeta{Name: ctxName, Labels: labels}
	if err := r.applyClusterRole(ctx, ps, cluster, contextRules(resources), subjects); err != nil {
		return nil, nil, err
	}
	// The leader workload's policies look things up too (settings validation, the background
	// scan), and it alone runs the scan.
	if err := r.applyLeaderIdentity(ctx, ps, labels, append(contextRules(resources), backgroundScanRules(scanned)...)); err != nil {
		return nil, nil, err
	}
	return resources, unknown, nil
}

// applyClusterRole writes a ClusterRole of rules and its binding to subjects, both named meta.Name.
func (r *policyServerReconciler) applyClusterRole(ctx context.Context, ps *kubewardenv1.PolicyServer, meta metav1.ObjectMeta, rules []rbacv1.PolicyRule, subjects []rbacv1.Subject) error {
	if err := r.ensure(ctx, ps, &rbacv1.ClusterRole{ObjectMeta: meta}, func(o client.Object) {
		o.(*rbacv1.ClusterRole).Rules = rules
	}); err != nil {
		return err
	}
	return r.ensure(ctx, ps, &rbacv1.ClusterRoleBinding{ObjectMeta: meta}, func(o client.Object) {
		b := o.(*rbacv1.ClusterRoleBinding)
		b.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: meta.Name}
		b.Subjects = subjects
	})
}

// applyLeaderIdentity writes the leader workload's ServiceAccount, the Role and RoleBinding that
// let it, and nothing else, read the signing key (with what else leading takes: leaderRules), and
// its ClusterRole of clusterRules. It is the controller's even when the user names the replicas'
// ServiceAccount: the key must not follow a user's account.
func (r *policyServerReconciler) applyLeaderIdentity(ctx context.Context, ps *kubewardenv1.PolicyServer, labels map[string]string, clusterRules []rbacv1.PolicyRule) error {
	name := leaderIdentityName(ps.Name)
	if err := r.ensure(ctx, ps, &corev1.ServiceAccount{ObjectMeta: r.meta(name, labels)}, func(client.Object) {}); err != nil {
		return err
	}
	if err := r.ensure(ctx, ps, &rbacv1.Role{ObjectMeta: r.meta(name, labels)}, func(o client.Object) {
		o.(*rbacv1.Role).Rules = leaderRules(ps.Name)
	}); err != nil {
		return err
	}
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: r.namespace}}
	if err := r.ensure(ctx, ps, &rbacv1.RoleBinding{ObjectMeta: r.meta(name, labels)}, func(o client.Object) {
		b := o.(*rbacv1.RoleBinding)
		b.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}
		b.Subjects = subjects
	}); err != nil {
		return err
	}
	return r.applyClusterRole(ctx, ps, metav1.ObjectMeta{Name: name, Labels: labels}, clusterRules, subjects)
}

// dropOwnServiceAccount deletes the ServiceAccount the controller created before the user named
// their own; one the controller does not control is left alone.
func (r *policyServerReconciler) dropOwnServiceAccount(ctx context.Context, ps *kubewardenv1.PolicyServer) error {
	own := &corev1.ServiceAccount{}
	err := r.nsReader.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: serviceAccountName(ps.Name)}, own)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read ServiceAccount %s: %w", serviceAccountName(ps.Name), err)
	}
	if ref := metav1.GetControllerOf(own); ref == nil || ref.UID != ps.UID {
		return nil
	}
	if err := r.client.Delete(ctx, own, client.Preconditions{UID: &own.UID}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete ServiceAccount %s: %w", own.Name, err)
	}
	return nil
}

func (r *policyServerReconciler) serviceAccountMissing(ctx context.Context, name string) bool {
	err := r.nsReader.Get(ctx, client.ObjectKey{Namespace: r.namespace, Name: name}, &corev1.ServiceAccount{})
	return apierrors.IsNotFound(err)
}
