package templatesync

import (
	"context"
	"fmt"

	openreportsv1alpha1 "github.com/openreports/reports-api/apis/openreports.io/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	policyv1 "regent.dev/regent/api/policy/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	reportsaggregate "regent.dev/regent/reports/aggregate"
)

// Reports name a policy by scope and name (reportsaggregate.LabelPolicy, LabelPolicyScope): a
// ClusterAdmissionPolicy or a ConfigurationPolicy is cluster-wide, an AdmissionPolicy is
// namespaced and reports only in its own namespace.

// ReportOwner returns the replicated Policy (of clusterNamespace) whose template is the policy a
// report names: the policy in scope with name, whose Reports live in namespace. It is "" when no
// template of that cluster namespace's policies is that policy (a policy created on the cluster
// itself).
func ReportOwner(ctx context.Context, c client.Reader, clusterNamespace string, scope reportsv1alpha1.PolicyScope, namespace, name string) (string, error) {
	var candidates []client.Object
	if scope == reportsv1alpha1.PolicyScopeNamespaced {
		candidates = []client.Object{&kubewardenv1.AdmissionPolicy{ObjectMeta: objectMeta(namespace, name)}}
	} else {
		candidates = []client.Object{
			&kubewardenv1.ClusterAdmissionPolicy{ObjectMeta: objectMeta("", name)},
			&policyv1.ConfigurationPolicy{ObjectMeta: objectMeta(clusterNamespace, name)},
		}
	}
	for _, obj := range candidates {
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return "", fmt.Errorf("owner of reported policy %s: %w", name, err)
		}
		if policy := obj.GetLabels()[PolicyLabel]; policy != "" && obj.GetLabels()[ClusterNamespaceLabel] == clusterNamespace {
			return policy, nil
		}
	}
	return "", nil
}

// reportedPolicy is the scope and the Report namespace ("" = every namespace) under which an
// admission policy template's results are reported.
func reportedPolicy(kind, namespace string) (scope reportsv1alpha1.PolicyScope, reportNamespace string) {
	if kind == kubewardenv1.KindAdmissionPolicy {
		return reportsv1alpha1.PolicyScopeNamespaced, namespace
	}
	return reportsv1alpha1.PolicyScopeCluster, ""
}

// reportedFailures counts the fail results the aggregated Reports (and, for a cluster-wide
// policy, ClusterReports) hold for the policy. It reads a page at a time from r (uncached in
// production), so the addon never holds the cluster's results.
func reportedFailures(ctx context.Context, r client.Reader, scope reportsv1alpha1.PolicyScope, namespace, name string) (int, error) {
	labels := client.MatchingLabels{
		reportsaggregate.LabelAggregatedBy: reportsaggregate.AggregatorName,
		reportsaggregate.LabelPolicy:       reportsv1alpha1.LabelSafe(name),
		reportsaggregate.LabelPolicyScope:  string(scope),
	}
	fails := 0
	for cont := ""; ; {
		opts := []client.ListOption{labels, client.Limit(reportPage), client.Continue(cont)}
		if namespace != "" {
			opts = append(opts, client.InNamespace(namespace))
		}
		var list openreportsv1alpha1.ReportList
		if err := r.List(ctx, &list, opts...); err != nil {
			return 0, fmt.Errorf("list reports of %s: %w", name, err)
		}
		for i := range list.Items {
			if reportsaggregate.PolicyOf(&list.Items[i]) == name {
				fails += list.Items[i].Summary.Fail
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	if scope != reportsv1alpha1.PolicyScopeCluster {
		return fails, nil
	}
	for cont := ""; ; {
		var list openreportsv1alpha1.ClusterReportList
		if err := r.List(ctx, &list, labels, client.Limit(reportPage), client.Continue(cont)); err != nil {
			return 0, fmt.Errorf("list cluster reports of %s: %w", name, err)
		}
		for i := range list.Items {
			if reportsaggregate.PolicyOf(&list.Items[i]) == name {
				fails += list.Items[i].Summary.Fail
			}
		}
		if cont = list.Continue; cont == "" {
			break
		}
	}
	return fails, nil
}

// reportPage bounds how many aggregated reports one read holds.
const reportPage = 100

func objectMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name}
}
