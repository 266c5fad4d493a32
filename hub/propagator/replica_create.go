package propagator

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// ReplicaCreator creates replicas and reads back, of the apiserver's answer, only the
// resourceVersion and generation the hub's expectations and rollout need. A large propagation is
// one create per replica (150,000 on a large fleet): decoding each answer into a whole Policy, as
// a typed client does, was a third of the hub's allocations, and its garbage collector's work
// grows with them.
type ReplicaCreator struct {
	rest rest.Interface
}

// NewReplicaCreator returns a creator over cfg and httpClient (a manager's, to share its
// connections and its rate limiter when cfg carries one).
func NewReplicaCreator(cfg *rest.Config, httpClient *http.Client, codecs serializer.CodecFactory) (*ReplicaCreator, error) {
	c, err := apiutil.RESTClientForGVK(policyv1.GroupVersion.WithKind("Policy"), true, false, cfg, codecs, httpClient)
	if err != nil {
		return nil, fmt.Errorf("replica creator: %w", err)
	}
	return &ReplicaCreator{rest: c}, nil
}

// Create creates p and sets its resourceVersion and generation from the answer. Errors are the
// apiserver's (apierrors.IsAlreadyExists and the like apply).
func (c *ReplicaCreator) Create(ctx context.Context, p *policyv1.Policy) error {
	p.APIVersion, p.Kind = policyv1.GroupVersion.String(), "Policy"
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	result := c.rest.Post().Namespace(p.Namespace).Resource("policies").Body(body).Do(ctx)
	// Error, unlike Raw, decodes a refusal into the apiserver's Status: its reason and message.
	if err := result.Error(); err != nil {
		return err
	}
	raw, _ := result.Raw()
	var created struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
			Generation      int64  `json:"generation"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &created); err != nil {
		return fmt.Errorf("read the created replica: %w", err)
	}
	p.ResourceVersion, p.Generation = created.Metadata.ResourceVersion, created.Metadata.Generation
	return nil
}
