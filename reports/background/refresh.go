package background

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
)

// refresh makes the scan follow the policy set: it reads the serving revisions, starts the
// informers of kinds newly needed and stops those no policy needs, and queues what the change
// made stale: the objects a new or changed policy covers (the worker evaluates those whose label
// is not the new generation) and the reports carrying a removed or changed policy's label (the
// worker drops results of a policy that no longer matches).
func (s *Scanner) refresh(ctx context.Context) error {
	var list kubewardenv1.PolicyRevisionList
	if err := s.cache.List(ctx, &list, client.InNamespace(s.opts.Namespace)); err != nil {
		return fmt.Errorf("list revisions: %w", err)
	}
	next, errs := scannedPolicies(list.Items)
	for _, err := range errs {
		s.log.Error(err, "revision not scanned")
	}
	for _, p := range next {
		annotations, err := s.policyAnnotations(ctx, p.owner)
		if err != nil {
			return err
		}
		p.classify(annotations)
	}
	discovered, err := discover(s.disco)
	if err != nil {
		if discovered == nil {
			return err
		}
		s.log.Error(err, "some API groups are not scanned")
	}
	covers := map[policyID][]resourceType{}
	need := map[schema.GroupResource]resourceType{}
	inputs := map[schema.GroupVersionResource]*watch{}
	for id, p := range next {
		covers[id] = typesOf(p, discovered)
		for _, t := range covers[id] {
			need[t.gvr.GroupResource()] = t
		}
		if p.namespace != "" {
			continue // an AdmissionPolicy reads nothing from the cluster
		}
		for _, car := range p.spec.ContextAwareResources {
			gv, _ := schema.ParseGroupVersion(car.APIVersion)
			i := slices.IndexFunc(discovered, func(t resourceType) bool {
				return t.gvr.GroupVersion() == gv && t.kind == car.Kind
			})
			if i < 0 {
				s.log.Info("context-aware resource not served; changes to it are not watched", "policy", p.ref.Name, "apiVersion", car.APIVersion, "kind", car.Kind)
				continue
			}
			t := discovered[i]
			if inputs[t.gvr] == nil {
				inputs[t.gvr] = &watch{t: t}
			}
			inputs[t.gvr].users = append(inputs[t.gvr].users, id)
		}
	}

	s.mu.Lock()
	old, oldCovers := s.policies, s.covers
	for gr, w := range s.types {
		if t, ok := need[gr]; !ok || t.gvr != w.t.gvr {
			close(w.stop)
			delete(s.types, gr)
		}
	}
	for gr, t := range need {
		if s.types[gr] == nil {
			// Its initial list queues every object: what no report covers yet gets one.
			s.types[gr] = s.newWatch(t, true, s.objectHandlers())
		}
	}
	s.order = s.order[:0]
	for gr := range s.types {
		s.order = append(s.order, gr)
	}
	slices.SortFunc(s.order, func(a, b schema.GroupResource) int { return strings.Compare(a.String(), b.String()) })
	for gvr, w := range s.watches {
		if inputs[gvr] == nil {
			close(w.stop)
			delete(s.watches, gvr)
		}
	}
	for gvr, in := range inputs {
		if w := s.watches[gvr]; w != nil {
			w.users = in.users
			continue
		}
		s.watches[gvr] = s.newWatch(in.t, false, s.inputHandlers(gvr))
		s.watches[gvr].users = in.users
	}
	needNamespaces := false
	for _, p := range next {
		needNamespaces = needNamespaces || p.nsSel != nil
	}
	switch {
	case needNamespaces && s.namespaces == nil:
		s.namespaces = s.newWatch(namespacesType, false, toolscache.ResourceEventHandlerDetailedFuncs{AddFunc: s.namespaceAdded, UpdateFunc: s.namespaceChanged})
	case !needNamespaces && s.namespaces != nil:
		close(s.namespaces.stop)
		s.namespaces = nil
	}
	s.policies, s.covers = next, covers
	s.mu.Unlock()

	for id, p := range next {
		o := old[id]
		if p.invalidSeverity != "" && (o == nil || o.invalidSeverity != p.invalidSeverity) {
			s.recorder.Eventf(ownerObject(p.owner), corev1.EventTypeWarning, "InvalidSeverity",
				"annotation %s=%q is not a severity (critical, high, medium, low, info): the policy's report results carry none",
				kubewardenv1.AnnotationSeverity, p.invalidSeverity)
		}
		if o == nil || o.version() != p.version() || !slices.Equal(oldCovers[id], covers[id]) {
			s.enqueueCovered(id, forced{})
		}
	}
	for id, o := range old {
		if p := next[id]; p == nil || p.version() != o.version() {
			k, _ := reportsv1alpha1.PolicyLabelKey(o.ref.Scope, o.ref.Name)
			s.enqueueReports(ctx, []string{k}, forced{})
		}
	}
	return nil
}

var namespacesType = resourceType{gvr: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, kind: "Namespace"}

// objectHandlers queue a scanned object when it appears and, re-evaluated with every policy,
// when it changes: an update that did not pass admission with a policy (its webhook failed open)
// must still get that policy's answer. A deleted object's report goes with it (ownerReference).
func (s *Scanner) objectHandlers() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if u, ok := o.(*unstructured.Unstructured); ok {
				s.enqueue(key{u.GetNamespace(), u.GetUID()}, forced{})
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			o, ok1 := oldObj.(*unstructured.Unstructured)
			n, ok2 := newObj.(*unstructured.Unstructured)
			if ok1 && ok2 && o.GetResourceVersion() != n.GetResourceVersion() {
				s.enqueue(key{n.GetNamespace(), n.GetUID()}, forced{all: true})
			}
		},
	}
}

// inputHandlers mark the policies reading gvr as context-aware input for re-evaluation when one
// of its objects changes; the initial list is not a change.
func (s *Scanner) inputHandlers(gvr schema.GroupVersionResource) toolscache.ResourceEventHandler {
	changed := func(any) { s.inputChanged(gvr) }
	return toolscache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(o any, initial bool) {
			if !initial {
				changed(o)
			}
		},
		UpdateFunc: func(_, o any) { changed(o) },
		DeleteFunc: changed,
	}
}

func (s *Scanner) inputChanged(gvr schema.GroupVersionResource) {
	s.mu.Lock()
	if w := s.watches[gvr]; w != nil {
		for _, id := range w.users {
			s.dirty[id] = true
		}
	}
	s.mu.Unlock()
	nudge(s.inputs)
}

// inputDebounce coalesces a burst of changes to context-aware inputs into one re-queue of what
// their policies cover.
const inputDebounce = time.Second

func (s *Scanner) inputLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.inputs:
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(inputDebounce):
		}
		s.mu.Lock()
		dirty := s.dirty
		s.dirty = map[policyID]bool{}
		s.mu.Unlock()
		for id := range dirty {
			s.enqueueCovered(id, forced{policies: map[policyID]bool{id: true}})
		}
	}
}
