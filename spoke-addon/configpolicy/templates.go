package configpolicy

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/templates"
)

// objectTemplates returns the policy's object templates with their managed-cluster templates
// resolved, object-templates-raw rendered and parsed. Every object a template reads is
// watched through the same kind watches as the templates' own objects (and recorded in out's
// refs), so a change of a Secret, ConfigMap, ClusterClaim or looked-up object re-evaluates the
// policy. A failure is the message to report: nothing of the policy is applied then.
func (e *evaluator) objectTemplates(ctx context.Context, p *policyv1.ConfigurationPolicy, out *policyOutcome) ([]*policyv1.ObjectTemplate, string, error) {
	disabled := strings.EqualFold(p.GetAnnotations()[templates.DisableAnnotation], "true")
	r := &clusterReader{e: e, policy: client.ObjectKeyFromObject(p), out: out}
	cfg := templates.Config{Reader: r}
	// Values hub templates encrypted are decrypted first, as OCM does: templates here may use them.
	dec := &decrypter{policy: p, reader: r}
	if p.Spec.ObjectTemplatesRaw != "" {
		if len(p.Spec.ObjectTemplates) > 0 {
			return nil, "spec.object-templates and spec.object-templates-raw cannot both be set", nil
		}
		raw, err := dec.text(ctx, p.Spec.ObjectTemplatesRaw)
		if err != nil {
			return nil, "", r.fail(err)
		}
		if !disabled {
			if raw, err = templates.ResolveText(ctx, raw, cfg); err != nil {
				return nil, "", r.fail(err)
			}
		}
		var parsed []*policyv1.ObjectTemplate
		if err := yaml.Unmarshal([]byte(raw), &parsed); err != nil {
			return nil, fmt.Sprintf("object-templates-raw does not render to a list of object templates: %v", err), nil
		}
		return parsed, "", nil
	}
	resolved := make([]*policyv1.ObjectTemplate, len(p.Spec.ObjectTemplates))
	for i, t := range p.Spec.ObjectTemplates {
		resolved[i] = t
		if t == nil {
			continue
		}
		encrypted := templates.HasEncrypted(t.ObjectDefinition.Raw)
		resolve := !disabled && templates.HasTemplates(t.ObjectDefinition.Raw, false)
		if !encrypted && !resolve {
			continue
		}
		def, err := dec.json(ctx, t.ObjectDefinition.Raw)
		if err != nil {
			return nil, "", r.fail(fmt.Errorf("object-templates[%d]: %w", i, err))
		}
		if resolve {
			if def, err = templates.ResolveJSON(ctx, def, cfg); err != nil {
				return nil, "", r.fail(err)
			}
		}
		c := t.DeepCopy()
		c.ObjectDefinition.Raw = def
		// A decrypted value is a secret whatever the kind: its diff stays out of the status
		// unless the policy asks for it, as OCM does for templates with sensitive data.
		if encrypted && c.RecordDiff == "" {
			c.RecordDiff = recordDiffCensored
		}
		resolved[i] = c
	}
	return resolved, "", nil
}

// templateError is a resolution failure the user must see in status; other errors (a watch
// that cannot start) are the reconcile's to retry.
type templateError struct{ err error }

func (t templateError) Error() string { return t.err.Error() }

func (r *clusterReader) fail(err error) error {
	if r.internal != nil {
		return r.internal
	}
	return templateError{err: err}
}

// clusterReader serves template reads from the controller's cache after making sure the kind
// is watched for this policy.
type clusterReader struct {
	e        *evaluator
	policy   types.NamespacedName
	out      *policyOutcome
	internal error // a watch that could not start: retried, not reported
}

func (r *clusterReader) watch(ctx context.Context, apiVersion, kind, namespace, name string) (schema.GroupVersionKind, error) {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return schema.GroupVersionKind{}, fmt.Errorf("apiVersion %q: %w", apiVersion, err)
	}
	gvk := gv.WithKind(kind)
	if _, err := r.e.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
		return gvk, fmt.Errorf("the kind %s (%s) is not served by the cluster: %w", kind, apiVersion, err)
	}
	ref := watchRef{gvk: gvk, name: name, namespace: namespace}
	if err := r.e.watch(ctx, r.policy, ref); err != nil {
		r.internal = fmt.Errorf("watch %s: %w", gvk, err)
		return gvk, r.internal
	}
	r.out.refs = append(r.out.refs, ref)
	return gvk, nil
}

func (r *clusterReader) Get(ctx context.Context, apiVersion, kind, namespace, name string) (*unstructured.Unstructured, error) {
	gvk, err := r.watch(ctx, apiVersion, kind, namespace, name)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(gvk)
	if err := r.e.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return obj, nil
}

func (r *clusterReader) List(ctx context.Context, apiVersion, kind, namespace, selector string) ([]unstructured.Unstructured, error) {
	gvk, err := r.watch(ctx, apiVersion, kind, namespace, "")
	if err != nil {
		return nil, err
	}
	sel, err := labels.Parse(selector)
	if err != nil {
		return nil, fmt.Errorf("label selector %q: %w", selector, err)
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(kind + "List"))
	if err := r.e.reader.List(ctx, list, client.InNamespace(namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, err
	}
	return list.Items, nil
}
