package opa

import (
	"context"
	"crypto/sha256"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// decisionTTL is how long one (token, verb, path) answer is reused: long enough that a client
// querying in a loop costs the apiserver two reviews every few seconds, short enough that a revoked
// binding or token stops working soon after.
const decisionTTL = 5 * time.Second

// maxCachedDecisions bounds the cache; past it the cache starts over.
const maxCachedDecisions = 10000

// Authorizer checks a bearer token with a TokenReview and the request with a SubjectAccessReview
// on the hub apiserver.
type Authorizer struct {
	client kubernetes.Interface
	now    func() time.Time

	mu    sync.Mutex
	cache map[[32]byte]decision
}

type decision struct {
	authenticated bool
	allowed       bool
	reason        string
	expires       time.Time
}

// NewAuthorizer reviews through client.
func NewAuthorizer(client kubernetes.Interface) *Authorizer {
	return &Authorizer{client: client, now: time.Now, cache: map[[32]byte]decision{}}
}

// Authorize reports whether token authenticates and, if so, whether its user may verb path (a
// non-resource URL).
func (a *Authorizer) Authorize(ctx context.Context, token, verb, path string) (authenticated, allowed bool, reason string, err error) {
	key := sha256.Sum256([]byte(verb + "\x00" + path + "\x00" + token))
	a.mu.Lock()
	d, ok := a.cache[key]
	a.mu.Unlock()
	if ok && a.now().Before(d.expires) {
		return d.authenticated, d.allowed, d.reason, nil
	}
	d, err = a.review(ctx, token, verb, path)
	if err != nil {
		return false, false, "", err
	}
	d.expires = a.now().Add(decisionTTL)
	a.mu.Lock()
	if len(a.cache) >= maxCachedDecisions {
		a.cache = map[[32]byte]decision{}
	}
	a.cache[key] = d
	a.mu.Unlock()
	return d.authenticated, d.allowed, d.reason, nil
}

func (a *Authorizer) review(ctx context.Context, token, verb, path string) (decision, error) {
	tr, err := a.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("token review: %w", err)
	}
	if !tr.Status.Authenticated {
		return decision{reason: tr.Status.Error}, nil
	}
	u := tr.Status.User
	extra := map[string]authorizationv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	sar, err := a.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, fmt.Errorf("subject access review: %w", err)
	}
	reason := sar.Status.Reason
	if !sar.Status.Allowed && reason == "" {
		reason = fmt.Sprintf("user %q may not %s %s", u.Username, verb, path)
	}
	return decision{authenticated: true, allowed: sar.Status.Allowed, reason: reason}, nil
}
