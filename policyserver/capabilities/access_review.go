package capabilities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// canIRequest is can_i's payload. Kubewarden's SDKs disagree on its shape: the documented (and
// Rust) one wraps a snake_case review in subject_access_review; the Go SDK sends a
// SubjectAccessReview object with its spec. Both are accepted.
type canIRequest struct {
	SubjectAccessReview *struct {
		User               string   `json:"user"`
		Groups             []string `json:"groups"`
		ResourceAttributes *struct {
			Namespace   string `json:"namespace"`
			Verb        string `json:"verb"`
			Group       string `json:"group"`
			Version     string `json:"version"`
			Resource    string `json:"resource"`
			Subresource string `json:"subresource"`
			Name        string `json:"name"`
		} `json:"resource_attributes"`
	} `json:"subject_access_review"`
	Spec         *authorizationv1.SubjectAccessReviewSpec `json:"spec"`
	DisableCache bool                                     `json:"disable_cache"`
}

func (r canIRequest) spec() (authorizationv1.SubjectAccessReviewSpec, error) {
	if r.Spec != nil {
		return *r.Spec, nil
	}
	s := r.SubjectAccessReview
	if s == nil || s.ResourceAttributes == nil {
		return authorizationv1.SubjectAccessReviewSpec{}, errors.New("the request has no subject_access_review.resource_attributes (nor a SubjectAccessReview spec)")
	}
	a := s.ResourceAttributes
	return authorizationv1.SubjectAccessReviewSpec{
		User: s.User, Groups: s.Groups,
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: a.Namespace, Verb: a.Verb, Group: a.Group, Version: a.Version,
			Resource: a.Resource, Subresource: a.Subresource, Name: a.Name,
		},
	}, nil
}

// canI asks the apiserver whether a user may do something, answering with the review's status
// as Kubewarden does. It reads no resource, so contextAwareResources do not apply.
func (k *kubernetesLookups) canI(ctx context.Context, payload []byte) ([]byte, error) {
	var req canIRequest
	if err := json.Unmarshal(payload, &req); err != nil {
		return nil, fmt.Errorf("can_i: payload is not a Kubewarden can_i request: %w", err)
	}
	spec, err := req.spec()
	if err != nil {
		return nil, fmt.Errorf("can_i: %w", err)
	}
	key, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	return k.cache.fetch(ctx, "can_i\x00"+string(key), req.DisableCache, func(ctx context.Context) ([]byte, error) {
		review, err := k.reviews.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("can_i: SubjectAccessReview: %w", err)
		}
		return json.Marshal(review.Status)
	})
}
