package fleet

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationlisters "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	addonclient "open-cluster-management.io/api/client/addon/clientset/versioned"
	addoninformers "open-cluster-management.io/api/client/addon/informers/externalversions"
	addonlisters "open-cluster-management.io/api/client/addon/listers/addon/v1alpha1"
)

// AddonHealthOptions configure StartAddonHealth.
type AddonHealthOptions struct {
	// Clock tells the time and wakes a checker when a Lease runs out; the real clock when nil.
	Clock clock.WithDelayedExecution
	// Grace is how long after its renewal a Lease keeps its addon Available; AddonLeaseGrace
	// when 0.
	Grace time.Duration
	// Log receives writes that failed and are retried; discarded when zero.
	Log logr.Logger
}

// StartAddonHealth runs, for every managed cluster, what OCM's registration agent (the
// klusterlet) would: it turns each addon's Lease on the cluster into the Available condition of
// the cluster's ManagedClusterAddOn of that name on the hub, with OCM's reasons and grace. A
// local fleet has no klusterlet, so without this no addon ever shows Available.
//
// It returns once every checker has read its cluster, and runs until ctx ends or the fleet stops.
func (f *Fleet) StartAddonHealth(ctx context.Context, opts AddonHealthOptions) error {
	if opts.Clock == nil {
		opts.Clock = clock.RealClock{}
	}
	if opts.Grace <= 0 {
		opts.Grace = AddonLeaseGrace
	}
	ctx, cancel := context.WithCancel(ctx)
	var running sync.WaitGroup
	stop := func() { cancel(); running.Wait() }
	for _, c := range f.Managed {
		h, err := newAddonHealth(f.Hub.Config, c, opts)
		if err == nil {
			err = h.start(ctx, &running)
		}
		if err != nil {
			stop()
			return fmt.Errorf("addon health of %s: %w", c.Name, err)
		}
	}
	f.mu.Lock()
	f.standIns = append(f.standIns, stop)
	f.mu.Unlock()
	return nil
}

// addonHealth keeps the Available condition of one managed cluster's addons. It is woken by
// changes of the addons and of the cluster's Leases, and by a timer at the moment the freshest
// renewal runs out, which no event announces.
type addonHealth struct {
	cluster string
	opts    AddonHealthOptions
	hub     addonclient.Interface

	hubInformers   addoninformers.SharedInformerFactory
	localInformers informers.SharedInformerFactory
	synced         []cache.InformerSynced
	addons         addonlisters.ManagedClusterAddOnNamespaceLister
	leases         coordinationlisters.LeaseLister

	queue workqueue.TypedRateLimitingInterface[string]
	// expiries belong to the single worker; their callbacks only touch the queue.
	expiries map[string]clock.Timer
}

func newAddonHealth(hubConfig *rest.Config, c *Cluster, opts AddonHealthOptions) (*addonHealth, error) {
	hub, err := addonclient.NewForConfig(hubConfig)
	if err != nil {
		return nil, err
	}
	local, err := kubernetes.NewForConfig(c.Config)
	if err != nil {
		return nil, err
	}
	h := &addonHealth{
		cluster:        c.Name,
		opts:           opts,
		hub:            hub,
		hubInformers:   addoninformers.NewSharedInformerFactoryWithOptions(hub, 0, addoninformers.WithNamespace(c.Name)),
		localInformers: informers.NewSharedInformerFactory(local, 0),
		queue:          workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
		expiries:       map[string]clock.Timer{},
	}
	addons := h.hubInformers.Addon().V1alpha1().ManagedClusterAddOns()
	leases := h.localInformers.Coordination().V1().Leases()
	h.addons = addons.Lister().ManagedClusterAddOns(c.Name)
	h.leases = leases.Lister()
	h.synced = []cache.InformerSynced{addons.Informer().HasSynced, leases.Informer().HasSynced}
	if _, err := addons.Informer().AddEventHandler(handle(h.addonChanged)); err != nil {
		return nil, err
	}
	if _, err := leases.Informer().AddEventHandler(handle(h.leaseChanged)); err != nil {
		return nil, err
	}
	return h, nil
}

func handle(changed func(obj any)) cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{AddFunc: changed, UpdateFunc: func(_, obj any) { changed(obj) }, DeleteFunc: changed}
}

// start runs the informers and, once they have listed, the worker: deciding before that would
// call an addon's Lease missing only because it was not read yet.
func (h *addonHealth) start(ctx context.Context, running *sync.WaitGroup) error {
	h.hubInformers.Start(ctx.Done())
	h.localInformers.Start(ctx.Done())
	running.Add(1)
	go func() {
		defer running.Done()
		<-ctx.Done()
		h.queue.ShutDown()
		h.hubInformers.Shutdown()
		h.localInformers.Shutdown()
	}()
	if !cache.WaitForCacheSync(ctx.Done(), h.synced...) {
		return errors.New("ManagedClusterAddOns and Leases not listed before the context ended")
	}
	running.Add(1)
	go func() {
		defer running.Done()
		for h.next(ctx) {
		}
		for _, t := range h.expiries {
			t.Stop()
		}
	}()
	return nil
}

func (h *addonHealth) addonChanged(obj any) {
	if key, err := cache.DeletionHandlingObjectToName(obj); err == nil {
		h.queue.Add(key.Name)
	}
}

// leaseChanged wakes the addon whose Lease this is: same name, in the namespace the addon is
// installed in. Every other Lease on the cluster (leader elections, nodes) is ignored.
func (h *addonHealth) leaseChanged(obj any) {
	key, err := cache.DeletionHandlingObjectToName(obj)
	if err != nil {
		return
	}
	if addon, err := h.addons.Get(key.Name); err == nil && addonLeaseNamespace(addon) == key.Namespace {
		h.queue.Add(key.Name)
	}
}

func (h *addonHealth) next(ctx context.Context) bool {
	name, shutdown := h.queue.Get()
	if shutdown {
		return false
	}
	defer h.queue.Done(name)
	if err := h.sync(ctx, name); err != nil {
		// A conflict means someone else wrote the addon; its event brings the retry's input.
		if !apierrors.IsConflict(err) && ctx.Err() == nil {
			h.opts.Log.Error(err, "addon availability", "cluster", h.cluster, "addon", name)
		}
		h.queue.AddRateLimited(name)
		return true
	}
	h.queue.Forget(name)
	return true
}

func (h *addonHealth) sync(ctx context.Context, name string) error {
	addon, err := h.addons.Get(name)
	if apierrors.IsNotFound(err) {
		h.wakeAt(name, time.Time{}, time.Time{})
		return nil
	}
	if err != nil {
		return err
	}
	if !addonHealthFromLease(addon) {
		h.wakeAt(name, time.Time{}, time.Time{})
		return nil
	}
	lease, err := h.leases.Leases(addonLeaseNamespace(addon)).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	now := h.opts.Clock.Now()
	want, expires := addonAvailability(name, lease, now, h.opts.Grace)
	h.wakeAt(name, now, expires)
	if sameAvailability(meta.FindStatusCondition(addon.Status.Conditions, want.Type), want) {
		return nil
	}
	conditions := slices.Clone(addon.Status.Conditions)
	want.LastTransitionTime = metav1.NewTime(now)
	meta.SetStatusCondition(&conditions, want)
	// Only the conditions are sent. Without OCM's conversion webhook the registrations
	// addon-framework writes as v1beta1 are stored as empty entries that v1alpha1 would reject;
	// the apiserver lets them stand while unchanged, but the Go type writes them back changed. The
	// resourceVersion makes the apiserver refuse the patch when someone wrote since this read.
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": addon.UID, "resourceVersion": addon.ResourceVersion},
		"status":   map[string]any{"conditions": conditions},
	})
	if err != nil {
		return err
	}
	if _, err := h.hub.AddonV1alpha1().ManagedClusterAddOns(h.cluster).Patch(ctx, name, types.MergePatchType, patch,
		metav1.PatchOptions{}, "status"); err != nil {
		return fmt.Errorf("write Available of ManagedClusterAddOn %s/%s: %w", h.cluster, name, err)
	}
	return nil
}

// wakeAt makes the addon named name be checked again at the given moment, replacing any earlier
// wake-up; a zero moment cancels it.
func (h *addonHealth) wakeAt(name string, now, at time.Time) {
	if t, ok := h.expiries[name]; ok {
		t.Stop()
		delete(h.expiries, name)
	}
	if !at.IsZero() {
		h.expiries[name] = h.opts.Clock.AfterFunc(at.Sub(now), func() { h.queue.Add(name) })
	}
}
