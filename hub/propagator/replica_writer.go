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

// ReplicaWriter creates and updates replicas and reads back, of the apiserver's answer, only the
// resourceVersion and generation the hub's expectations and rollout need. A large propagation is
// one create per replica (150,000 on a large fleet), and a progressive rollout one update more:
// decoding each answer into a whole Policy, as a typed client does, was a third of the hub's
// allocations, and its garbage collector's work grows with them.
type ReplicaWriter struct {
	rest rest.Interface
}

// NewReplicaWriter returns a writer over cfg and httpClient (a manager's, to share its
// connections and its rate limiter when cfg carries one).
func NewReplicaWriter(cfg *rest.Config, httpClient *http.Client, codecs serializer.CodecFactory) (*ReplicaWriter, error) {
	c, err := apiutil.RESTClientForGVK(policyv1.GroupVersion.WithKind("Policy"), true, false, cfg, codecs, httpClient)
	if err != nil {
		return nil, fmt.Errorf("replica writer: %w", err)
	}
	return &ReplicaWriter{rest: c}, nil
}

// Create creates p and sets its resourceVersion and generation from the answer. Errors are the
// apiserver's (apierrors.IsAlreadyExists and the like apply).
func (c *ReplicaWriter) Create(ctx context.Context, p *policyv1.Policy) error {
	return c.send(ctx, c.rest.Post().Namespace(p.Namespace).Resource("policies"), p)
}

// Update replaces p, conditioned on its resourceVersion, and sets its resourceVersion and
// generation from the answer. Errors are the apiserver's (apierrors.IsConflict and the like apply).
func (c *ReplicaWriter) Update(ctx context.Context, p *policyv1.Policy) error {
	return c.send(ctx, c.rest.Put().Namespace(p.Namespace).Resource("policies").Name(p.Name), p)
}

func (c *ReplicaWriter) send(ctx context.Context, req *rest.Request, p *policyv1.Policy) error {
	p.APIVersion, p.Kind = policyv1.GroupVersion.String(), "Policy"
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	result := req.Body(body).Do(ctx)
	// Error, unlike Raw, decodes a refusal into the apiserver's Status: its reason and message.
	if err := result.Error(); err != nil {
		return err
	}
	raw, _ := result.Raw()
	var written struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
			Generation      int64  `json:"generation"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(raw, &written); err != nil {
		return fmt.Errorf("read the written replica: %w", err)
	}
	p.ResourceVersion, p.Generation = written.Metadata.ResourceVersion, written.Metadata.Generation
	return nil
}
