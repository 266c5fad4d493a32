package opa

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/server/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/klog/v2"
)

const (
	// PolicyLabel marks a ConfigMap whose data keys are Rego placement modules.
	PolicyLabel      = "regent.dev/placement-policy"
	PolicyLabelValue = "rego"
	// StatusAnnotation is kube-mgmt's: tools that read kube-mgmt's status read Regent's too.
	StatusAnnotation = "openpolicyagent.org/kube-mgmt-status"

	// Event reasons on a policy ConfigMap.
	ReasonLoaded      = "PolicyLoaded"
	ReasonLoadFailed  = "PolicyLoadFailed"
	ReasonStatusWrite = "PolicyStatusWriteFailed"
)

// loadStatus is kube-mgmt's annotation value.
type loadStatus struct {
	Status string         `json:"status"`
	Error  *types.ErrorV1 `json:"error,omitempty"`
}

// Policies loads the labelled ConfigMaps of one namespace into an engine, reloading on every
// change, and reports each outcome on the ConfigMap (annotation and Event).
type Policies struct {
	engine    *Engine
	client    kubernetes.Interface
	namespace string
	recorder  record.EventRecorder

	mu sync.Mutex
	// seen is, per ConfigMap, the fingerprint of the data last loaded (or refused) and the
	// annotation that outcome wrote: an update that changes neither (our own annotation write
	// coming back) costs no recompile and no write.
	seen map[string]seenPolicy
	// orphans are sources whose ConfigMap is gone but whose modules could not be unloaded because
	// others still call them; each later change tries again.
	orphans map[string]bool
}

type seenPolicy struct {
	fingerprint string
	status      string
}

// NewPolicies watches namespace for policy ConfigMaps; recorder receives the Events.
func NewPolicies(engine *Engine, client kubernetes.Interface, namespace string, recorder record.EventRecorder) *Policies {
	return &Policies{engine: engine, client: client, namespace: namespace, recorder: recorder, seen: map[string]seenPolicy{}, orphans: map[string]bool{}}
}

// Start starts the ConfigMap informer and waits until every existing policy has been loaded once.
func (p *Policies) Start(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(p.client, 0,
		informers.WithNamespace(p.namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.LabelSelector = PolicyLabel + "=" + PolicyLabelValue
		}))
	inf := factory.Core().V1().ConfigMaps().Informer()
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.apply(ctx, obj) },
		UpdateFunc: func(_, obj any) { p.apply(ctx, obj) },
		DeleteFunc: func(obj any) { p.delete(ctx, obj) },
	}); err != nil {
		return fmt.Errorf("placement policies: %w", err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return fmt.Errorf("placement policies: cache did not sync: %w", ctx.Err())
	}
	return nil
}

func sourceOf(cm *corev1.ConfigMap) string { return cm.Namespace + "/" + cm.Name }

// modulesOf names each key's module as kube-mgmt does: namespace/name/key.
func modulesOf(cm *corev1.ConfigMap) map[string]string {
	mods := make(map[string]string, len(cm.Data))
	for k, v := range cm.Data {
		mods[sourceOf(cm)+"/"+k] = v
	}
	return mods
}

func fingerprint(data map[string]string) string {
	keys := make([]string, 0, len(data))
	for k := range data {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	h := sha256.New()
	for _, k := range keys {
		fmt.Fprintf(h, "%d:%s%d:%s", len(k), k, len(data[k]), data[k])
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}

func (p *Policies) apply(ctx context.Context, obj any) {
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	src := sourceOf(cm)
	fp := fingerprint(cm.Data)
	p.mu.Lock()
	defer p.mu.Unlock()
	prev, known := p.seen[src]
	if known && prev.fingerprint == fp {
		if cm.Annotations[StatusAnnotation] != prev.status {
			p.writeStatus(ctx, cm, prev.status)
		}
		return
	}

	st := loadStatus{Status: "ok"}
	if err := p.engine.SetSource(src, modulesOf(cm)); err != nil {
		st = loadStatus{Status: "error", Error: toErrorV1(err)}
		p.recorder.Eventf(cm, corev1.EventTypeWarning, ReasonLoadFailed, "placement policy not loaded (the previous version, if any, still serves): %s", describe(st.Error))
	} else {
		p.recorder.Eventf(cm, corev1.EventTypeNormal, ReasonLoaded, "placement policy loaded: %d module(s)", len(cm.Data))
		p.unloadOrphans(ctx)
	}
	raw, err := json.Marshal(st)
	if err != nil {
		klog.FromContext(ctx).Error(err, "encode placement policy status", "configmap", src)
		return
	}
	p.seen[src] = seenPolicy{fingerprint: fp, status: string(raw)}
	if cm.Annotations[StatusAnnotation] != string(raw) {
		p.writeStatus(ctx, cm, string(raw))
	}
}

func (p *Policies) delete(ctx context.Context, obj any) {
	if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	cm, ok := obj.(*corev1.ConfigMap)
	if !ok {
		return
	}
	src := sourceOf(cm)
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.seen, src)
	p.orphans[src] = true
	p.unloadOrphans(ctx)
}

// unloadOrphans unloads deleted ConfigMaps' modules that no loaded module needs any more. One
// that is still called stays (unloading it would not compile, as OPA refuses such a DELETE) until
// its callers change.
func (p *Policies) unloadOrphans(ctx context.Context) {
	for src := range p.orphans {
		if err := p.engine.RemoveSource(src); err != nil {
			// The ConfigMap is gone, so the only place left to say it is the log.
			klog.FromContext(ctx).Error(err, "deleted placement policy stays loaded: other modules still use it", "configmap", src)
			continue
		}
		delete(p.orphans, src)
	}
}

func (p *Policies) writeStatus(ctx context.Context, cm *corev1.ConfigMap, status string) {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{StatusAnnotation: status}}})
	if err != nil {
		return
	}
	if _, err := p.client.CoreV1().ConfigMaps(cm.Namespace).Patch(ctx, cm.Name, k8stypes.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		p.recorder.Eventf(cm, corev1.EventTypeWarning, ReasonStatusWrite, "write %s: %v", StatusAnnotation, err)
	}
}

// toErrorV1 shapes a load error as OPA's REST API reports a failed PUT /v1/policies: code
// invalid_parameter and one entry per Rego error with its file, row and column.
func toErrorV1(err error) *types.ErrorV1 {
	var aerrs ast.Errors
	if errors.As(err, &aerrs) {
		return types.NewErrorV1(types.CodeInvalidParameter, types.MsgCompileModuleError).WithASTErrors(aerrs)
	}
	return types.NewErrorV1(types.CodeInternal, "%v", err)
}

func describe(e *types.ErrorV1) string {
	msg := e.Message
	for _, err := range e.Errors {
		msg += "; " + err.Error()
	}
	return msg
}
