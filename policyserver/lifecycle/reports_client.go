package lifecycle

import (
	"context"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/api/scheme"
	"regent.dev/regent/reports"
	"regent.dev/regent/reports/admission"
)

// withReportSources gives admission reports what they lack: a client of the replica's cluster
// (a client of its own, so its own rate limiter: a burst of report writes never delays the
// replica's Ready conditions) and the policies' annotations, which classify the results
// (Kubewarden's severity and category). The annotations come from metadata informers of the four
// policy kinds, running until ctx ends.
func withReportSources(ctx context.Context, o *admission.Options, cfg *rest.Config) (*admission.Options, error) {
	if o == nil {
		return nil, nil
	}
	out := *o
	if out.Client == nil {
		c, err := client.New(rest.CopyConfig(cfg), client.Options{Scheme: scheme.Scheme})
		if err != nil {
			return nil, fmt.Errorf("admission reports client: %w", err)
		}
		out.Client = c
	}
	if out.Annotations == nil {
		meta, err := metadata.NewForConfig(rest.CopyConfig(cfg))
		if err != nil {
			return nil, fmt.Errorf("admission reports: %w", err)
		}
		out.Annotations = startPolicyAnnotations(ctx, meta).lookup
	}
	return &out, nil
}

// policyAnnotations reads the annotations of the cluster's policies from metadata informers.
type policyAnnotations struct {
	byKind map[string]toolscache.SharedIndexInformer
	// firstSync makes the first lookup wait a bounded time for the informers' list, so answers
	// given as the replica starts are classified too; later lookups never wait.
	firstSync sync.Once
}

// firstSyncWait bounds that wait: where the policies cannot be listed (a policy server whose
// RBAC predates the policy read rule), reports go unclassified rather than late.
const firstSyncWait = 10 * time.Second

func startPolicyAnnotations(ctx context.Context, meta metadata.Interface) *policyAnnotations {
	factory := metadatainformer.NewSharedInformerFactory(meta, 0)
	resources := map[string]string{
		kubewardenv1.KindClusterAdmissionPolicy: "clusteradmissionpolicies", kubewardenv1.KindAdmissionPolicy: "admissionpolicies",
		kubewardenv1.KindClusterAdmissionPolicyGroup: "clusteradmissionpolicygroups", kubewardenv1.KindAdmissionPolicyGroup: "admissionpolicygroups",
	}
	p := &policyAnnotations{byKind: map[string]toolscache.SharedIndexInformer{}}
	for kind, resource := range resources {
		p.byKind[kind] = factory.ForResource(schema.GroupVersionResource{
			Group: kubewardenv1.GroupVersion.Group, Version: kubewardenv1.GroupVersion.Version, Resource: resource}).Informer()
	}
	factory.Start(ctx.Done())
	return p
}

// lookup is admission.Options.Annotations. If the informers could not list the policies within
// firstSyncWait it knows none: the background scan, or the resource's next admission, classifies
// those results later.
func (p *policyAnnotations) lookup(ref reports.PolicyRef, namespace string) map[string]string {
	p.firstSync.Do(func() {
		stop := make(chan struct{})
		t := time.AfterFunc(firstSyncWait, func() { close(stop) })
		defer t.Stop()
		synced := make([]toolscache.InformerSynced, 0, len(p.byKind))
		for _, inf := range p.byKind {
			synced = append(synced, inf.HasSynced)
		}
		toolscache.WaitForCacheSync(stop, synced...)
	})
	pr := kubewardenv1.ReportedReference(ref.Name, ref.Scope == reportsv1alpha1.PolicyScopeNamespaced, namespace)
	inf := p.byKind[pr.Kind]
	if inf == nil || !inf.HasSynced() {
		return nil
	}
	key := pr.Name
	if pr.Namespace != "" {
		key = pr.Namespace + "/" + pr.Name
	}
	o, ok, err := inf.GetIndexer().GetByKey(key)
	if err != nil || !ok {
		return nil
	}
	if m, ok := o.(interface{ GetAnnotations() map[string]string }); ok {
		return m.GetAnnotations()
	}
	return nil
}
