package configpolicy

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// readTimeout bounds the wait for a kind's informer to sync on first use; a kind the controller
// may not list would otherwise hold a worker forever.
const readTimeout = 30 * time.Second

// evaluateIn evaluates a template in one namespace ("" for cluster-scoped kinds): the named
// object, or every object of the kind when the template names none.
func (e *evaluator) evaluateIn(ctx context.Context, t *template, ns string, enforce bool) ([]objectResult, error) {
	if t.name != "" {
		existing := &unstructured.Unstructured{}
		existing.SetGroupVersionKind(t.gvk)
		readCtx, cancel := context.WithTimeout(ctx, readTimeout)
		err := e.reader.Get(readCtx, client.ObjectKey{Namespace: ns, Name: t.name}, existing)
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			existing = nil
		case err != nil:
			return nil, fmt.Errorf("get %s %s/%s: %w", t.resource, ns, t.name, err)
		}
		r, err := e.evaluateNamed(ctx, t, ns, existing, enforce)
		if err != nil {
			return nil, err
		}
		return []objectResult{r}, nil
	}
	return e.evaluateKind(ctx, t, ns, enforce)
}

func (e *evaluator) evaluateNamed(ctx context.Context, t *template, ns string, existing *unstructured.Unstructured, enforce bool) (objectResult, error) {
	r := objectResult{namespace: ns, name: t.name}
	if existing != nil {
		r.uid = string(existing.GetUID())
	}
	if t.complianceType == policyv1.MustNotHave {
		if existing == nil {
			r.state = missingAsExpected
			return r, nil
		}
		if ok, _ := compareObject(t.object, existing.Object, false, false); !ok {
			r.state = missingAsExpected
			return r, nil
		}
		return e.remove(ctx, t, r, existing, enforce)
	}
	if existing == nil {
		if !enforce {
			r.state = notFound
			return r, nil
		}
		obj := &unstructured.Unstructured{Object: deepCopy(t.object).(map[string]any)}
		delete(obj.Object, "status")
		obj.SetNamespace(ns)
		if err := e.writer.Create(ctx, obj); err != nil {
			if rq := requeueError("create "+t.resource, err); rq != nil {
				return r, rq
			}
			r.state, r.detail = writeFailed, writeFailure("create", t, err)
			return r, nil
		}
		r.state, r.uid = created, string(obj.GetUID())
		return r, nil
	}
	ok, desired := compareObject(t.object, existing.Object, t.onlyHave, t.metadataOnly)
	if ok {
		r.state = foundAsSpecified
		return r, nil
	}
	// With mustonlyhave the template may differ only in fields the apiserver defaults (protocol:
	// TCP on a Service port, say): a dry-run update of the desired object tells, as OCM does,
	// whether writing it would change anything at all. musthave tolerates extra fields, so
	// defaults cannot be the cause there and the API call is saved.
	if t.onlyHave || t.metadataOnly {
		if unchanged, err := e.updateIsNoop(ctx, t, existing, desired); err != nil {
			return r, err
		} else if unchanged {
			r.state = foundAsSpecified
			return r, nil
		}
	}
	diff, logDiff := t.diffFor(existing.Object, desired, ns)
	if logDiff != "" {
		log.FromContext(ctx).Info("object differs from its template", "kind", t.gvk.Kind, "namespace", ns, "name", t.name, "diff", logDiff)
	}
	if !enforce {
		r.state, r.diff = foundNotAsSpecified, diff
		return r, nil
	}
	if t.recreate == policyv1.RecreateOption("Always") {
		return e.recreate(ctx, t, r, existing, desired)
	}
	obj := &unstructured.Unstructured{Object: desired}
	if err := e.writer.Update(ctx, obj); err != nil {
		if rq := requeueError("update "+t.resource, err); rq != nil {
			return r, rq
		}
		// The apiserver refuses an update of an immutable field (a Job's template, a Service's
		// clusterIP) as invalid; OCM reads any invalid update that way.
		if apierrors.IsInvalid(err) {
			if t.recreate == policyv1.RecreateOption("IfRequired") {
				return e.recreate(ctx, t, r, existing, desired)
			}
			r.state, r.diff = updateImmutable, diff
			return r, nil
		}
		r.state, r.detail = writeFailed, writeFailure("update", t, err)
		return r, nil
	}
	r.state = updated
	return r, nil
}

// recreateWait bounds how long an evaluation waits for an object it deleted to recreate to be
// gone; finalizers on the object can hold it longer, and its deletion event re-evaluates.
const recreateWait = 10 * time.Second

// recreate deletes existing and creates desired in its place, for recreateOption Always or for
// IfRequired when an update was refused. The new object is the policy's own: createdByPolicy.
func (e *evaluator) recreate(ctx context.Context, t *template, r objectResult, existing *unstructured.Unstructured, desired map[string]any) (objectResult, error) {
	if existing.GetDeletionTimestamp() == nil {
		err := e.writer.Delete(ctx, existing, client.Preconditions{UID: ptr(existing.GetUID())})
		if err != nil && !apierrors.IsNotFound(err) {
			if rq := requeueError("delete "+t.resource+" to recreate it", err); rq != nil {
				return r, rq
			}
			r.state, r.detail = writeFailed, writeFailure("delete", t, err)
			return r, nil
		}
	}
	gone := func(ctx context.Context) (bool, error) {
		probe := &metav1.PartialObjectMetadata{}
		probe.SetGroupVersionKind(t.gvk)
		err := e.writer.Get(ctx, client.ObjectKeyFromObject(existing), probe)
		if apierrors.IsNotFound(err) {
			return true, nil
		}
		return err == nil && probe.UID != existing.GetUID(), err
	}
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, recreateWait, true, gone); err != nil {
		r.state = recreateTimeout
		return r, nil
	}
	obj := &unstructured.Unstructured{Object: deepCopy(desired).(map[string]any)}
	delete(obj.Object, "status")
	for _, f := range []string{"resourceVersion", "uid", "creationTimestamp", "managedFields", "generation", "deletionTimestamp", "deletionGracePeriodSeconds", "selfLink"} {
		unstructured.RemoveNestedField(obj.Object, "metadata", f)
	}
	if err := e.writer.Create(ctx, obj); err != nil {
		if rq := requeueError("recreate "+t.resource, err); rq != nil {
			return r, rq
		}
		r.state, r.detail = writeFailed, writeFailure("create", t, err)
		return r, nil
	}
	r.state, r.uid = recreated, string(obj.GetUID())
	return r, nil
}

// updateIsNoop reports whether updating existing to desired would leave every field the template
// names as it is. Status is not writable through an update, so a status mismatch is never a no-op.
func (e *evaluator) updateIsNoop(ctx context.Context, t *template, existing *unstructured.Unstructured, desired map[string]any) (bool, error) {
	if st, ok := t.object["status"]; ok && !matches(st, existing.Object["status"], t.onlyHave) {
		return false, nil
	}
	dry := &unstructured.Unstructured{Object: deepCopy(desired).(map[string]any)}
	if err := e.writer.Update(ctx, dry, client.DryRunAll); err != nil {
		if rq := requeueError("dry-run update "+t.resource, err); rq != nil {
			return false, rq
		}
		// An invalid or forbidden update is reported by the real write (enforce) or simply as a
		// mismatch (inform).
		return false, nil
	}
	for key := range t.object {
		switch key {
		case "apiVersion", "kind", "status":
			continue
		case "metadata":
			for _, f := range []string{"labels", "annotations"} {
				if !reflect.DeepEqual(dry.Object["metadata"].(map[string]any)[f], existing.Object["metadata"].(map[string]any)[f]) {
					return false, nil
				}
			}
		default:
			if !reflect.DeepEqual(dry.Object[key], existing.Object[key]) {
				return false, nil
			}
		}
	}
	return true, nil
}

// evaluateKind evaluates a template without a name against every object of its kind in ns.
// musthave/mustonlyhave comply when at least one object matches; mustnothave when none does.
func (e *evaluator) evaluateKind(ctx context.Context, t *template, ns string, enforce bool) ([]objectResult, error) {
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(t.gvk.GroupVersion().WithKind(t.gvk.Kind + "List"))
	opts := []client.ListOption{client.InNamespace(ns)}
	if t.selector != nil {
		sel, err := metav1.LabelSelectorAsSelector(t.selector)
		if err != nil {
			return []objectResult{{namespace: ns, state: writeFailed, detail: fmt.Sprintf("objectSelector: %v", err)}}, nil
		}
		opts = append(opts, client.MatchingLabelsSelector{Selector: sel})
	}
	readCtx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	if err := e.reader.List(readCtx, list, opts...); err != nil {
		return nil, fmt.Errorf("list %s in %q: %w", t.resource, ns, err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].GetName() < list.Items[j].GetName() })
	var out []objectResult
	for i := range list.Items {
		obj := &list.Items[i]
		if ok, _ := compareObject(t.object, obj.Object, t.onlyHave, t.metadataOnly); !ok {
			continue
		}
		r := objectResult{namespace: ns, name: obj.GetName(), uid: string(obj.GetUID()), state: foundAsSpecified}
		if t.complianceType == policyv1.MustNotHave {
			var err error
			if r, err = e.remove(ctx, t, r, obj, enforce); err != nil {
				return nil, err
			}
		}
		out = append(out, r)
	}
	if len(out) == 0 {
		state := notFound
		if t.complianceType == policyv1.MustNotHave {
			state = missingAsExpected
		}
		out = append(out, objectResult{namespace: ns, state: state})
	}
	return out, nil
}

// remove handles an object a mustnothave template matches: a violation when informing, deleted
// when enforcing.
func (e *evaluator) remove(ctx context.Context, t *template, r objectResult, obj *unstructured.Unstructured, enforce bool) (objectResult, error) {
	if !enforce {
		r.state = foundButShouldNot
		return r, nil
	}
	if err := e.writer.Delete(ctx, obj, client.Preconditions{UID: ptr(obj.GetUID())}); err != nil && !apierrors.IsNotFound(err) {
		if rq := requeueError("delete "+obj.GetKind(), err); rq != nil {
			return r, rq
		}
		r.state, r.detail = writeFailed, writeFailure("delete", t, err)
		return r, nil
	}
	r.state = deleted
	return r, nil
}

func ptr[T any](v T) *T { return &v }
