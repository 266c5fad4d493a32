package opa

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
)

// AdmissionOptions configure the Placement webhook and the remediator.
type AdmissionOptions struct {
	// Package is the Rego package whose document answers for a Placement; DefaultAdmissionPackage
	// when empty.
	Package string
	// Budget bounds one admission, retries included; DefaultAdmissionBudget when zero.
	Budget time.Duration
	// Disabled serves no webhook and runs no remediator.
	Disabled bool
	// DryRun makes the remediator only report (Events, log, metric) what it would change.
	DryRun bool
	// LeaderElection runs the remediator only in the hub replica holding the Lease
	// RemediatorLease in LeaderElectionNamespace (the policy namespace when empty); every replica
	// still serves the webhook and the query API, which write nothing.
	LeaderElection          bool
	LeaderElectionNamespace string
}

// exist reports whether any placement policy ConfigMap exists, loaded or refused: a policy that
// does not compile is still a policy its author means to enforce.
func (p *Policies) exist() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.seen) > 0 || len(p.orphans) > 0
}

// startAdmission starts what the webhook and the remediator read (namespaces, Placements) and the
// remediator, and returns the webhook.
func startAdmission(ctx context.Context, engine *Engine, policies *Policies, kube kubernetes.Interface, dyn dynamic.Interface,
	recorder record.EventRecorder, opts AdmissionOptions) (*Admission, error) {
	if opts.Package == "" {
		opts.Package = DefaultAdmissionPackage
	}
	if opts.Budget == 0 {
		opts.Budget = DefaultAdmissionBudget
	}
	labels, err := namespaceLabels(ctx, kube)
	if err != nil {
		return nil, err
	}
	ev := &evaluator{engine: engine, pkg: PackagePath(opts.Package), namespaceLabels: labels}
	rem := NewRemediator(ev, dyn, recorder, opts.DryRun)
	if err := rem.Start(ctx); err != nil {
		return nil, err
	}
	if err := rem.Watch(ctx, engine); err != nil {
		return nil, err
	}
	if !opts.LeaderElection {
		rem.NotifyAll() // what changed while the hub was down
		go rem.Run(ctx)
	} else {
		lease := leaseLock(kube, opts.LeaderElectionNamespace, leaseIdentity())
		go leadRemediation(ctx, lease, func(ctx context.Context) {
			rem.NotifyAll() // what changed while another replica led, or none did
			rem.Run(ctx)
		})
	}
	return &Admission{
		evaluator:     ev,
		policiesExist: func() bool { return policies.exist() || len(engine.Modules()) > 0 },
		recorder:      recorder,
		budget:        opts.Budget,
	}, nil
}

// namespaceLabels reads labels from a namespace informer, falling back to the apiserver for a
// namespace the cache has not seen yet; a miss on both is transient (the Placement's namespace
// exists, or the apiserver would not have asked).
func namespaceLabels(ctx context.Context, kube kubernetes.Interface) (func(context.Context, string) (map[string]string, error), error) {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(func(obj any) (any, error) {
		if ns, ok := obj.(*corev1.Namespace); ok {
			ns.ManagedFields = nil
		}
		return obj, nil
	}))
	nsInformer := factory.Core().V1().Namespaces()
	inf := nsInformer.Informer()
	lister := nsInformer.Lister()
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("placement admission: namespace cache did not sync: %w", ctx.Err())
	}
	return func(ctx context.Context, name string) (map[string]string, error) {
		if ns, err := lister.Get(name); err == nil {
			return ns.Labels, nil
		}
		ns, err := kube.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			if apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
				return nil, err
			}
			return nil, transientError{err}
		}
		return ns.Labels, nil
	}, nil
}
