package propagator

import (
	"context"
	"fmt"
	"strings"
	"sync"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// serviceAccountGVK is read, and watched, when a root names spec.hubTemplateOptions.serviceAccountName.
var serviceAccountGVK = corev1.SchemeGroupVersion.WithKind("ServiceAccount")

// templateServiceAccount is the ServiceAccount whose permissions a root's hub templates read with,
// if its spec names one. As on OCM it lives in the root's namespace.
func templateServiceAccount(root *policyv1.Policy) (types.NamespacedName, bool) {
	o := root.Spec.HubTemplateOptions
	if o == nil || o.ServiceAccountName == "" {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: root.Namespace, Name: o.ServiceAccountName}, true
}

// hubTemplateRun is what the resolutions of one root's hub templates share within one pass of
// its replica writes: the ServiceAccount they read as, and the authorization answers already had,
// so a thousand clusters reading the same ConfigMap ask the apiserver once, not a thousand times.
// A new pass asks again: a Role granted or taken away since counts from the next pass on.
type hubTemplateRun struct {
	r    *Reconciler
	root *policyv1.Policy
	sa   types.NamespacedName
	// withSA is false when the root names no ServiceAccount: templates then read only the root's
	// namespace (and their cluster's ManagedCluster), with the hub's own permissions.
	withSA bool

	once  sync.Once
	saUID types.UID
	saErr error

	mu      sync.Mutex
	answers map[accessQuery]error
}

func (r *Reconciler) newHubTemplateRun(root *policyv1.Policy) *hubTemplateRun {
	sa, ok := templateServiceAccount(root)
	return &hubTemplateRun{r: r, root: root, sa: sa, withSA: ok, answers: map[accessQuery]error{}}
}

// serviceAccount checks, once per pass, that the ServiceAccount exists. It is watched: creating
// it re-propagates the root, as OCM does.
func (t *hubTemplateRun) serviceAccount(ctx context.Context) error {
	t.once.Do(func() {
		if t.r.templateWatches != nil {
			if t.saErr = t.r.templateWatches.ensure(serviceAccountGVK, client.ObjectKeyFromObject(t.root), t.sa.Namespace); t.saErr != nil {
				return
			}
		}
		sa := &unstructured.Unstructured{}
		sa.SetGroupVersionKind(serviceAccountGVK)
		err := t.r.Reader.Get(ctx, t.sa, sa)
		switch {
		case apierrors.IsNotFound(err):
			t.saErr = fmt.Errorf("the service account in hubTemplateOptions.serviceAccountName (%s) does not exist", t.sa)
		case err != nil:
			t.saErr = fmt.Errorf("read the service account in hubTemplateOptions.serviceAccountName (%s): %w", t.sa, err)
		default:
			t.saUID = sa.GetUID()
		}
	})
	return t.saErr
}

// accessQuery is one read a template makes, as authorization sees it. Name is empty for a list.
type accessQuery struct {
	gvr             schema.GroupVersionResource
	namespace, name string
}

// authorize says whether the ServiceAccount may make the read. As on OCM, that takes list and
// watch of the object (with its name when the template names one, so a Role limited by
// resourceNames serves); get alone is not enough, since a read is kept current by a watch.
// Asked with a SubjectAccessReview, so the answer is the apiserver's own (RBAC, webhooks) while
// the hub needs no right to act as the ServiceAccount: it reads from its cache, as without one.
func (t *hubTemplateRun) authorize(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) error {
	mapping, err := t.r.Client.RESTMapper().RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return fmt.Errorf("%s: %w", gvk, err)
	}
	q := accessQuery{gvr: mapping.Resource, namespace: namespace, name: name}
	t.mu.Lock()
	answer, known := t.answers[q]
	t.mu.Unlock()
	if known {
		return answer
	}
	decided, answer := t.review(ctx, q)
	if decided {
		t.mu.Lock()
		t.answers[q] = answer
		t.mu.Unlock()
	}
	return answer
}

// review asks the apiserver whether the ServiceAccount may list and watch what q names. decided
// is false when the question could not be asked (the hub may not, the apiserver did not answer):
// that is no answer about the ServiceAccount.
func (t *hubTemplateRun) review(ctx context.Context, q accessQuery) (decided bool, err error) {
	for _, verb := range []string{"list", "watch"} {
		allowed, reason, err := t.subjectAccessReview(ctx, verb, q)
		if err != nil {
			return false, err
		}
		if !allowed {
			return true, t.denied(verb, q, reason)
		}
	}
	return true, nil
}

func (t *hubTemplateRun) subjectAccessReview(ctx context.Context, verb string, q accessQuery) (bool, string, error) {
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		// Who the ServiceAccount is once its token is authenticated.
		User:   "system:serviceaccount:" + t.sa.Namespace + ":" + t.sa.Name,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + t.sa.Namespace, "system:authenticated"},
		UID:    string(t.saUID),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: q.namespace, Verb: verb, Group: q.gvr.Group, Version: q.gvr.Version, Resource: q.gvr.Resource, Name: q.name,
		},
	}}
	// Unstructured: the review needs no place in the hub's scheme.
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(sar)
	if err != nil {
		return false, "", err
	}
	u := &unstructured.Unstructured{Object: obj}
	u.SetGroupVersionKind(authorizationv1.SchemeGroupVersion.WithKind("SubjectAccessReview"))
	if err := t.r.Client.Create(ctx, u); err != nil {
		return false, "", fmt.Errorf("ask whether the service account %s may %s %s: %w", t.sa, verb, q.gvr.Resource, err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, sar); err != nil {
		return false, "", err
	}
	s := sar.Status
	reason := s.Reason
	if s.EvaluationError != "" {
		reason = strings.TrimSpace(reason + " " + s.EvaluationError)
	}
	return s.Allowed && !s.Denied, reason, nil
}

// denied is the error a refused read resolves to, in the words of the apiserver's own refusals.
func (t *hubTemplateRun) denied(verb string, q accessQuery, reason string) error {
	what := q.gvr.Resource
	if q.name != "" {
		what += " " + q.name
	}
	where := "at the cluster scope"
	if q.namespace != "" {
		where = fmt.Sprintf("in the namespace %q", q.namespace)
	}
	msg := fmt.Sprintf("the service account %s of hubTemplateOptions.serviceAccountName cannot %s %s in API group %q %s: hub templates need list and watch of what they read",
		t.sa, verb, what, q.gvr.Group, where)
	if reason != "" {
		msg += " (" + reason + ")"
	}
	return fmt.Errorf("%s", msg)
}
