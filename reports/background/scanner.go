package background

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/metadata/metadatainformer"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/api/scheme"
)

// Evaluator runs one loaded policy generation on an AdmissionRequest the way the audit endpoint
// does; *policyserver.Server is one.
type Evaluator interface {
	Audit(ctx context.Context, policy string, generation int64, request []byte) (*admissionv1.AdmissionResponse, string, error)
}

// Options configure a Scanner.
type Options struct {
	// Config reaches the cluster scanned, which also holds the PolicyRevisions.
	Config *rest.Config
	// Namespace holds the revisions (default regent-system); PolicyServer names the server whose
	// revisions are scanned (default "default").
	Namespace, PolicyServer string
	// Interval re-evaluates every resource with every policy that matches it, for what changed
	// without an event (0: never).
	Interval time.Duration
	// Workers bound the resources evaluated at once (default 2): the scan shares the server's
	// evaluation slots with admission, which it must not crowd out.
	Workers int
	// QPS and Burst limit the scan's requests to the apiserver, apart from the replica's own
	// (default 200 and 400: at most about 100 reports written a second, each a read and a write).
	QPS   float32
	Burst int
	// Registerer publishes the scan's metrics (nil: none).
	Registerer prometheus.Registerer
	Logger     logr.Logger
}

// Scanner is the background scan of one policy server.
type Scanner struct {
	opts     Options
	eval     Evaluator
	api      client.Client
	cache    crcache.Cache
	dyn      dynamic.Interface
	meta     metadata.Interface
	disco    discovery.DiscoveryInterface
	kube     kubernetes.Interface
	queue    workqueue.TypedRateLimitingInterface[key]
	recorder record.EventRecorder
	events   record.EventBroadcaster
	metrics  *metrics
	log      logr.Logger
	pokes    chan struct{}
	inputs   chan struct{}

	mu       sync.Mutex
	policies map[policyID]*policy
	covers   map[policyID][]resourceType
	types    map[schema.GroupResource]*watch
	order    []schema.GroupResource                 // types' keys, sorted
	watches  map[schema.GroupVersionResource]*watch // context-aware inputs
	// namespaces watches the namespaces' labels while a policy has a namespace selector.
	namespaces *watch
	force      map[key]forced
	dirty      map[policyID]bool // policies whose context-aware inputs changed
}

// key is a resource by its namespace and UID, which is also its report's name.
type key struct {
	namespace string
	uid       types.UID
}

// forced are policies to evaluate even if the report's label says they are current.
type forced struct {
	all      bool
	policies map[policyID]bool
}

func (f forced) has(id policyID) bool { return f.all || f.policies[id] }

// watch is an informer of one kind with its own stop channel, so it can end when no policy
// needs it any more.
type watch struct {
	t        resourceType
	informer toolscache.SharedIndexInformer
	stop     chan struct{}
	// users are the policies reading the kind as a context-aware input.
	users []policyID
}

const uidIndex = "uid"

// New builds a scanner that evaluates with eval.
func New(opts Options, eval Evaluator) (*Scanner, error) {
	if opts.Config == nil {
		return nil, errors.New("background scan: no apiserver configuration")
	}
	if opts.Namespace == "" {
		opts.Namespace = "regent-system"
	}
	if opts.PolicyServer == "" {
		opts.PolicyServer = "default"
	}
	if opts.Workers <= 0 {
		opts.Workers = 2
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.QPS <= 0 {
		opts.QPS, opts.Burst = 200, 400
	}
	opts.Config = rest.CopyConfig(opts.Config)
	opts.Config.QPS, opts.Config.Burst = opts.QPS, max(opts.Burst, int(opts.QPS))
	s := &Scanner{
		opts: opts, eval: eval, metrics: newMetrics(opts.Registerer), log: opts.Logger.WithName("background-scan"),
		pokes: make(chan struct{}, 1), inputs: make(chan struct{}, 1),
		policies: map[policyID]*policy{}, covers: map[policyID][]resourceType{},
		types: map[schema.GroupResource]*watch{}, watches: map[schema.GroupVersionResource]*watch{},
		force: map[key]forced{}, dirty: map[policyID]bool{},
	}
	var err error
	if s.api, err = client.New(opts.Config, client.Options{Scheme: scheme.Scheme}); err != nil {
		return nil, fmt.Errorf("background scan: %w", err)
	}
	if s.dyn, err = dynamic.NewForConfig(opts.Config); err != nil {
		return nil, fmt.Errorf("background scan: %w", err)
	}
	if s.meta, err = metadata.NewForConfig(opts.Config); err != nil {
		return nil, fmt.Errorf("background scan: %w", err)
	}
	if s.disco, err = discovery.NewDiscoveryClientForConfig(opts.Config); err != nil {
		return nil, fmt.Errorf("background scan: %w", err)
	}
	if s.kube, err = kubernetes.NewForConfig(opts.Config); err != nil {
		return nil, fmt.Errorf("background scan: %w", err)
	}
	s.events = record.NewBroadcaster()
	s.recorder = s.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "regent-background-scan"})
	s.cache, err = crcache.New(opts.Config, crcache.Options{
		Scheme: scheme.Scheme,
		ByObject: map[client.Object]crcache.ByObject{
			&kubewardenv1.PolicyRevision{}: {
				Namespaces: map[string]crcache.Config{opts.Namespace: {}},
				Label:      labels.SelectorFromSet(labels.Set{kubewardenv1.PolicyServerLabel: opts.PolicyServer}),
			},
		},
	})
	if err != nil {
		return nil, fmt.Errorf("background scan: %w", err)
	}
	s.queue = workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[key](),
		workqueue.TypedRateLimitingQueueConfig[key]{Name: "background-scan-" + opts.PolicyServer})
	return s, nil
}

// Metadata-only informers: the scan needs the reports' labels, never their results.
var (
	resourceReportMeta = metaOf(reportsv1alpha1.GroupVersion.WithKind("ResourceReport"))
	clusterReportMeta  = metaOf(reportsv1alpha1.GroupVersion.WithKind("ClusterResourceReport"))
)

func metaOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

// Run scans until ctx is done.
func (s *Scanner) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	s.events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: s.kube.CoreV1().Events("")})
	defer s.events.Shutdown()
	defer s.queue.ShutDown()
	defer s.stopWatches()

	poke := func(any) { nudge(s.pokes) }
	handlers := toolscache.ResourceEventHandlerFuncs{AddFunc: poke, DeleteFunc: poke, UpdateFunc: func(_, o any) { poke(o) }}
	// A deleted policy's results go from every report, also those admission wrote for a policy
	// the scan never evaluated (backgroundAudit off).
	policyHandlers := toolscache.ResourceEventHandlerFuncs{AddFunc: poke, UpdateFunc: func(_, o any) { poke(o) },
		DeleteFunc: func(o any) { poke(o); s.policyDeleted(ctx, o) }}
	for obj, h := range map[client.Object]toolscache.ResourceEventHandler{
		&kubewardenv1.PolicyRevision{}: handlers, &kubewardenv1.ClusterAdmissionPolicy{}: policyHandlers, &kubewardenv1.AdmissionPolicy{}: policyHandlers,
		&kubewardenv1.ClusterAdmissionPolicyGroup{}: policyHandlers, &kubewardenv1.AdmissionPolicyGroup{}: policyHandlers,
	} {
		inf, err := s.cache.GetInformer(ctx, obj)
		if err != nil {
			return fmt.Errorf("background scan: %w", err)
		}
		if _, err := inf.AddEventHandler(h); err != nil {
			return fmt.Errorf("background scan: %w", err)
		}
	}
	for _, obj := range []client.Object{resourceReportMeta, clusterReportMeta} {
		if _, err := s.cache.GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("background scan: %w", err)
		}
	}
	wg.Go(func() { _ = s.cache.Start(ctx) })
	if !s.cache.WaitForCacheSync(ctx) {
		return fmt.Errorf("background scan: caches never synced: %w", ctx.Err())
	}
	s.refreshOrRetry(ctx)
	// Reports of policies deleted while no scan ran: looked at once, then on every interval.
	s.enqueueReports(ctx, nil, forced{})
	for range s.opts.Workers {
		wg.Go(func() {
			for s.processNext(ctx) {
			}
		})
	}
	wg.Go(func() { s.inputLoop(ctx) })
	var tick <-chan time.Time
	if s.opts.Interval > 0 {
		t := time.NewTicker(s.opts.Interval)
		defer t.Stop()
		tick = t.C
	}
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.pokes:
			s.refreshOrRetry(ctx)
		case <-tick:
			s.rescan(ctx)
		}
	}
}

// refreshRetry is how long a failed refresh (discovery unreachable) waits before it is tried
// again when nothing else changes.
const refreshRetry = 10 * time.Second

func (s *Scanner) refreshOrRetry(ctx context.Context) {
	if err := s.refresh(ctx); err != nil && ctx.Err() == nil {
		s.log.Error(err, "policies not refreshed; retrying", "after", refreshRetry)
		time.AfterFunc(refreshRetry, func() { nudge(s.pokes) })
	}
}

// policyDeleted queues the reports holding results of a deleted policy.
func (s *Scanner) policyDeleted(ctx context.Context, o any) {
	if d, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = d.Obj
	}
	var ref kubewardenv1.PolicyReference
	switch o.(type) {
	case *kubewardenv1.AdmissionPolicy:
		ref.Kind = kubewardenv1.KindAdmissionPolicy
	case *kubewardenv1.ClusterAdmissionPolicy:
		ref.Kind = kubewardenv1.KindClusterAdmissionPolicy
	case *kubewardenv1.AdmissionPolicyGroup:
		ref.Kind = kubewardenv1.KindAdmissionPolicyGroup
	case *kubewardenv1.ClusterAdmissionPolicyGroup:
		ref.Kind = kubewardenv1.KindClusterAdmissionPolicyGroup
	default:
		return
	}
	m, ok := o.(metav1.Object)
	if !ok {
		return
	}
	ref.Name = m.GetName()
	scope := reportsv1alpha1.PolicyScopeCluster
	if ref.Kind == kubewardenv1.KindAdmissionPolicy || ref.Kind == kubewardenv1.KindAdmissionPolicyGroup {
		scope = reportsv1alpha1.PolicyScopeNamespaced
	}
	k, _ := reportsv1alpha1.PolicyLabelKey(scope, ref.ReportedName())
	s.enqueueReports(ctx, []string{k}, forced{})
}

// rescan re-evaluates everything: what changed without an event (a context-aware input's
// content a policy read, a policy's own time-dependent answer) is caught here.
func (s *Scanner) rescan(ctx context.Context) {
	s.mu.Lock()
	ids := make([]policyID, 0, len(s.policies))
	for id := range s.policies {
		ids = append(ids, id)
	}
	s.mu.Unlock()
	all := forced{all: true}
	for _, id := range ids {
		s.enqueueCovered(id, all)
	}
	s.enqueueReports(ctx, nil, all)
	s.log.V(1).Info("periodic rescan queued", "policies", len(ids))
}

func nudge(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// enqueue adds k, remembering what must be evaluated whatever its labels say.
func (s *Scanner) enqueue(k key, f forced) {
	s.restoreForce(k, f)
	s.queue.Add(k)
}

// restoreForce merges f into what k must evaluate when next processed.
func (s *Scanner) restoreForce(k key, f forced) {
	if !f.all && len(f.policies) == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.force[k]
	cur.all = cur.all || f.all
	for id := range f.policies {
		if cur.policies == nil {
			cur.policies = map[policyID]bool{}
		}
		cur.policies[id] = true
	}
	s.force[k] = cur
}

func (s *Scanner) takeForce(k key) forced {
	s.mu.Lock()
	defer s.mu.Unlock()
	f := s.force[k]
	delete(s.force, k)
	return f
}

// enqueueCovered queues every object of the kinds policy id covers (in its namespace for an
// AdmissionPolicy).
func (s *Scanner) enqueueCovered(id policyID, f forced) {
	s.mu.Lock()
	p := s.policies[id]
	var stores []toolscache.Indexer
	for _, t := range s.covers[id] {
		if w := s.types[t.gvr.GroupResource()]; w != nil {
			stores = append(stores, w.informer.GetIndexer())
		}
	}
	s.mu.Unlock()
	if p == nil {
		return
	}
	for _, store := range stores {
		var objs []any
		if p.namespace != "" {
			objs, _ = store.ByIndex(toolscache.NamespaceIndex, p.namespace)
		} else {
			objs = store.List()
		}
		for _, o := range objs {
			if m, ok := o.(metav1.Object); ok {
				s.enqueue(key{m.GetNamespace(), m.GetUID()}, f)
			}
		}
	}
}

// enqueueReports queues the resource of every report carrying one of the label keys (every
// report when keys is nil).
func (s *Scanner) enqueueReports(ctx context.Context, keys []string, f forced) {
	for _, list := range []*metav1.PartialObjectMetadataList{listOf(resourceReportMeta), listOf(clusterReportMeta)} {
		selectors := [][]client.ListOption{nil}
		if keys != nil {
			selectors = selectors[:0]
			for _, k := range keys {
				selectors = append(selectors, []client.ListOption{client.HasLabels{k}})
			}
		}
		for _, opts := range selectors {
			if err := s.cache.List(ctx, list, opts...); err != nil {
				s.log.Error(err, "list reports")
				continue
			}
			for i := range list.Items {
				s.enqueue(key{list.Items[i].Namespace, types.UID(list.Items[i].Name)}, f)
			}
		}
	}
}

func listOf(m *metav1.PartialObjectMetadata) *metav1.PartialObjectMetadataList {
	l := &metav1.PartialObjectMetadataList{}
	l.SetGroupVersionKind(m.GroupVersionKind().GroupVersion().WithKind(m.Kind + "List"))
	return l
}

// namespaceChanged re-queues, when a namespace's labels change, its objects of every kind a
// policy with a namespace selector covers (and the Namespace itself): whether they match may
// have changed, which the worker decides.
func (s *Scanner) namespaceChanged(oldObj, newObj any) {
	o, ok1 := oldObj.(*metav1.PartialObjectMetadata)
	n, ok2 := newObj.(*metav1.PartialObjectMetadata)
	if !ok1 || !ok2 || labels.Equals(o.Labels, n.Labels) {
		return
	}
	s.requeueNamespace(n)
}

// namespaceAdded requeues what a new namespace holds: an object whose watch event came before
// its namespace's was judged without the namespace's labels (an unknown namespace has none) and
// would not be judged again. Objects of the first list wait for it (namespaceLabels).
func (s *Scanner) namespaceAdded(obj any, isInInitialList bool) {
	if n, ok := obj.(*metav1.PartialObjectMetadata); ok && !isInInitialList {
		s.requeueNamespace(n)
	}
}

// requeueNamespace enqueues n's objects of every type a namespace-selecting policy covers, and n.
func (s *Scanner) requeueNamespace(n *metav1.PartialObjectMetadata) {
	s.mu.Lock()
	var stores []toolscache.Indexer
	seen := map[schema.GroupResource]bool{}
	for id, p := range s.policies {
		if p.nsSel == nil {
			continue
		}
		for _, t := range s.covers[id] {
			if w := s.types[t.gvr.GroupResource()]; w != nil && t.namespaced && !seen[t.gvr.GroupResource()] {
				seen[t.gvr.GroupResource()] = true
				stores = append(stores, w.informer.GetIndexer())
			}
		}
	}
	_, nsWatched := s.types[schema.GroupResource{Resource: "namespaces"}]
	s.mu.Unlock()
	for _, store := range stores {
		objs, _ := store.ByIndex(toolscache.NamespaceIndex, n.Name)
		for _, o := range objs {
			if m, ok := o.(metav1.Object); ok {
				s.enqueue(key{m.GetNamespace(), m.GetUID()}, forced{})
			}
		}
	}
	if nsWatched {
		s.enqueue(key{"", n.UID}, forced{})
	}
}

func (s *Scanner) stopWatches() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for gr, w := range s.types {
		close(w.stop)
		delete(s.types, gr)
	}
	for gvr, w := range s.watches {
		close(w.stop)
		delete(s.watches, gvr)
	}
	if s.namespaces != nil {
		close(s.namespaces.stop)
		s.namespaces = nil
	}
}

// newWatch starts an informer of t's objects; full objects (minus managed fields) for scanned
// kinds, metadata only for context-aware inputs, whose events alone matter here.
func (s *Scanner) newWatch(t resourceType, full bool, handlers toolscache.ResourceEventHandler) *watch {
	indexers := toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc, uidIndex: byUID}
	var inf toolscache.SharedIndexInformer
	if full {
		inf = dynamicinformer.NewFilteredDynamicInformer(s.dyn, t.gvr, metav1.NamespaceAll, 0, indexers, nil).Informer()
		_ = inf.SetTransform(func(o any) (any, error) {
			if u, ok := o.(*unstructured.Unstructured); ok {
				u.SetManagedFields(nil)
			}
			return o, nil
		})
	} else {
		inf = metadatainformer.NewFilteredMetadataInformer(s.meta, t.gvr, metav1.NamespaceAll, 0, indexers, nil).Informer()
	}
	_ = inf.SetWatchErrorHandler(func(_ *toolscache.Reflector, err error) { s.watchFailed(t, err) })
	if handlers != nil {
		_, _ = inf.AddEventHandler(handlers)
	}
	w := &watch{t: t, informer: inf, stop: make(chan struct{})}
	go inf.Run(w.stop)
	return w
}

func byUID(o any) ([]string, error) {
	m, ok := o.(metav1.Object)
	if !ok {
		return nil, nil
	}
	return []string{string(m.GetUID())}, nil
}

// watchFailed tells the policies that need t why their scan is stuck: typically the policy
// server may not list the kind.
func (s *Scanner) watchFailed(t resourceType, err error) {
	s.metrics.errors.WithLabelValues("list").Inc()
	s.log.Error(err, "cannot list or watch", "resource", t.gvr.String())
	s.mu.Lock()
	var owners []kubewardenv1.PolicyReference
	for id, ts := range s.covers {
		for _, c := range ts {
			if c.gvr == t.gvr {
				owners = append(owners, s.policies[id].owner)
			}
		}
	}
	for _, w := range s.watches {
		if w.t.gvr == t.gvr {
			for _, id := range w.users {
				if p := s.policies[id]; p != nil {
					owners = append(owners, p.owner)
				}
			}
		}
	}
	s.mu.Unlock()
	for _, o := range owners {
		s.recorder.Eventf(ownerObject(o), corev1.EventTypeWarning, "BackgroundScanFailed",
			"background scan of %s cannot list or watch them: %v", t.gvr.GroupResource(), err)
	}
}

// ownerObject is enough of the policy for an event to name it.
func ownerObject(o kubewardenv1.PolicyReference) client.Object {
	meta := metav1.ObjectMeta{Name: o.Name, Namespace: o.Namespace, UID: types.UID(o.UID)}
	switch o.Kind {
	case kubewardenv1.KindAdmissionPolicy:
		return &kubewardenv1.AdmissionPolicy{ObjectMeta: meta}
	case kubewardenv1.KindAdmissionPolicyGroup:
		return &kubewardenv1.AdmissionPolicyGroup{ObjectMeta: meta}
	case kubewardenv1.KindClusterAdmissionPolicyGroup:
		return &kubewardenv1.ClusterAdmissionPolicyGroup{ObjectMeta: meta}
	}
	return &kubewardenv1.ClusterAdmissionPolicy{ObjectMeta: meta}
}
