package capabilities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	authorizationv1client "k8s.io/client-go/kubernetes/typed/authorization/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/utils/clock"

	"regent.dev/regent/policyserver/engine"
)

// rediscoverAfter spaces out discovery refreshes: a kind unknown at startup (a CRD installed
// later) is found on a later lookup, but a policy asking for a kind that does not exist cannot
// turn every admission into a discovery round.
const rediscoverAfter = 30 * time.Second

// kubernetesLookups serves the kubernetes namespace of Kubewarden's host capabilities.
type kubernetesLookups struct {
	dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper
	reviews authorizationv1client.SubjectAccessReviewInterface
	cache   *ttlCache
	clock   clock.PassiveClock

	mu sync.Mutex
	// mappings memoises the mapper, whose lookup was most of a cached call's cost (13 of
	// 15 µs); it is emptied whenever discovery is refreshed.
	mappings       map[engine.Resource]*meta.RESTMapping
	lastDiscovered time.Time
}

func newKubernetesLookups(cfg *rest.Config, cache *ttlCache, clk clock.PassiveClock) (*kubernetesLookups, error) {
	cfg = rest.CopyConfig(cfg)
	// No client-side rate limit: lookups sit on the admission path, where a token bucket would
	// only queue admissions (at client-go's 5/s, or even 100/s, it did: disable_cache lookups
	// took 7.7 ms instead of 2.7). What bounds them is the server's workers, each evaluation
	// waiting on one lookup at a time, and on the apiserver priority and fairness.
	cfg.QPS = -1
	// A backstop for clients that do not take a context (discovery); evaluations stop waiting
	// at their own deadline long before.
	cfg.Timeout = 30 * time.Second
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	authz, err := authorizationv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &kubernetesLookups{
		dynamic: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)),
		reviews: authz.SubjectAccessReviews(), cache: cache, clock: clk, mappings: map[engine.Resource]*meta.RESTMapping{},
	}, nil
}

// resourceRequest is the payload of get_resource and of both list operations.
type resourceRequest struct {
	APIVersion    string `json:"api_version"`
	Kind          string `json:"kind"`
	Name          string `json:"name"`
	Namespace     string `json:"namespace"`
	LabelSelector string `json:"label_selector"`
	FieldSelector string `json:"field_selector"`
	DisableCache  bool   `json:"disable_cache"`
}

func (k *kubernetesLookups) call(ctx context.Context, c engine.HostCall) ([]byte, error) {
	if c.Operation == "can_i" {
		return k.canI(ctx, c.Payload)
	}
	var req resourceRequest
	if err := json.Unmarshal(c.Payload, &req); err != nil {
		return nil, fmt.Errorf("%s: payload is not a Kubewarden %s request: %w", c.Capability(), c.Operation, err)
	}
	if req.APIVersion == "" || req.Kind == "" {
		return nil, fmt.Errorf("%s: the request names no api_version or kind", c.Capability())
	}
	res := engine.Resource{APIVersion: req.APIVersion, Kind: req.Kind}
	if err := allowed(c, res); err != nil {
		return nil, err
	}
	mapping, err := k.mapping(res)
	if err != nil {
		return nil, err
	}
	namespaced := mapping.Scope.Name() == meta.RESTScopeNameNamespace
	key := strings.Join([]string{c.Operation, req.APIVersion, req.Kind, req.Namespace, req.Name, req.LabelSelector, req.FieldSelector}, "\x00")
	switch c.Operation {
	case "get_resource":
		if req.Name == "" {
			return nil, fmt.Errorf("get_resource %s: the request names no resource", res)
		}
		ns := req.Namespace
		if !namespaced {
			ns = "" // as in Kubewarden: a namespace given for a cluster-scoped kind is ignored
		} else if ns == "" {
			return nil, fmt.Errorf("get_resource %s %s: %s is namespaced and the request names no namespace", res, req.Name, req.Kind)
		}
		return k.cache.fetch(ctx, key, req.DisableCache, func(ctx context.Context) ([]byte, error) {
			obj, err := k.dynamic.Resource(mapping.Resource).Namespace(ns).Get(ctx, req.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("get %s %s: %w", res, qualified(ns, req.Name), err)
			}
			return obj.MarshalJSON()
		})
	case "list_resources_by_namespace":
		if !namespaced {
			return nil, fmt.Errorf("list_resources_by_namespace %s: %s is cluster-scoped; use list_resources_all", res, req.Kind)
		}
		if req.Namespace == "" {
			return nil, fmt.Errorf("list_resources_by_namespace %s: the request names no namespace", res)
		}
		return k.list(ctx, key, mapping.Resource, res, req)
	default: // list_resources_all
		req.Namespace = ""
		return k.list(ctx, key, mapping.Resource, res, req)
	}
}

func (k *kubernetesLookups) list(ctx context.Context, key string, gvr schema.GroupVersionResource, res engine.Resource, req resourceRequest) ([]byte, error) {
	return k.cache.fetch(ctx, key, req.DisableCache, func(ctx context.Context) ([]byte, error) {
		list, err := k.dynamic.Resource(gvr).Namespace(req.Namespace).List(ctx, metav1.ListOptions{
			LabelSelector: req.LabelSelector, FieldSelector: req.FieldSelector,
		})
		if err != nil {
			where := "in every namespace"
			if req.Namespace != "" {
				where = "in namespace " + req.Namespace
			}
			return nil, fmt.Errorf("list %s %s: %w", res, where, err)
		}
		return list.MarshalJSON()
	})
}

// allowed enforces the policy's contextAwareResources, as Kubewarden does: the policy server's
// service account can read more than any one policy should.
func allowed(c engine.HostCall, res engine.Resource) error {
	for _, a := range c.Allowed {
		if a == res {
			return nil
		}
	}
	names := make([]string, len(c.Allowed))
	for i, a := range c.Allowed {
		names[i] = a.String()
	}
	list := "it lists none"
	if len(names) > 0 {
		list = "it lists " + strings.Join(names, ", ")
	}
	return fmt.Errorf("policy %s may not read %s: the resource is %w (%s)", c.Policy, res, ErrNotAllowed, list)
}

// mapping resolves apiVersion and kind to the resource to call, rediscovering once in a while
// so kinds added after startup are found.
func (k *kubernetesLookups) mapping(res engine.Resource) (*meta.RESTMapping, error) {
	k.mu.Lock()
	m, ok := k.mappings[res]
	k.mu.Unlock()
	if ok {
		return m, nil
	}
	gv, err := schema.ParseGroupVersion(res.APIVersion)
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", res, err)
	}
	gk := schema.GroupKind{Group: gv.Group, Kind: res.Kind}
	m, err = k.mapper.RESTMapping(gk, gv.Version)
	if meta.IsNoMatchError(err) && k.rediscover() {
		m, err = k.mapper.RESTMapping(gk, gv.Version)
	}
	if err != nil {
		return nil, fmt.Errorf("resolve %s: %w", res, err)
	}
	k.mu.Lock()
	k.mappings[res] = m
	k.mu.Unlock()
	return m, nil
}

// rediscover refreshes discovery unless it was refreshed within rediscoverAfter, and says
// whether it did.
func (k *kubernetesLookups) rediscover() bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	now := k.clock.Now()
	if now.Sub(k.lastDiscovered) < rediscoverAfter {
		return false
	}
	k.lastDiscovered = now
	k.mapper.Reset()
	clear(k.mappings)
	return true
}

func qualified(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
