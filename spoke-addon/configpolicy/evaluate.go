package configpolicy

import (
	"context"
	"errors"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// evaluator reads the objects a policy's templates name, compares them and, when enforcing,
// writes them. It reads them through reader (objectCaches, whose informers are the watches),
// namespaces through namespaceReader (the manager's cache), and writes through writer.
type evaluator struct {
	reader          client.Reader
	namespaceReader client.Reader
	writer          client.Client
	mapper          meta.RESTMapper
	// watch makes sure reader holds what ref names and that its events re-evaluate policy. It is
	// called before the objects are read or written, so the events of the evaluation's own writes
	// are not lost.
	watch func(ctx context.Context, policy types.NamespacedName, ref watchRef) error
}

// watchRef is one kind (and name, empty for any) a policy looks at, in one namespace ("" for a
// cluster-scoped kind, or every namespace).
type watchRef struct {
	gvk       schema.GroupVersionKind
	name      string
	namespace string
}

// templateOutcome is the evaluation of one object template.
type templateOutcome struct {
	compliant bool
	message   string
	related   []policyv1.RelatedObject
}

// policyOutcome is the evaluation of a whole policy and what it looked at.
type policyOutcome struct {
	templates      []templateOutcome
	refs           []watchRef
	usesNamespaces bool // namespace changes can change the outcome
	unmapped       bool // a template names a kind the cluster does not serve (yet)
}

// errRequeue marks errors after which the evaluation must be retried rather than reported, such
// as a write conflict with a newer version of the object.
var errRequeue = errors.New("retry")

func (e *evaluator) evaluate(ctx context.Context, p *policyv1.ConfigurationPolicy) (policyOutcome, error) {
	var out policyOutcome
	objectTemplates, refused, err := e.objectTemplates(ctx, p, &out)
	var tmplErr templateError
	switch {
	case errors.As(err, &tmplErr):
		// Nothing of a policy whose templates do not resolve is applied.
		out.templates = append(out.templates, templateOutcome{message: tmplErr.Error()})
		return out, nil
	case err != nil:
		return out, err
	case refused != "":
		out.templates = append(out.templates, templateOutcome{message: refused})
		return out, nil
	}
	enforce := strings.EqualFold(string(p.Spec.RemediationAction), string(policyv1.Enforce))
	var namespaces []namespaceInfo
	namespacesListed := false
	for i, tmpl := range objectTemplates {
		if tmpl == nil {
			out.templates = append(out.templates, templateOutcome{message: fmt.Sprintf("object-templates[%d] is empty", i)})
			continue
		}
		t, err := e.template(tmpl)
		if err != nil {
			out.templates = append(out.templates, templateOutcome{message: fmt.Sprintf("object-templates[%d]: %v", i, err)})
			continue
		}
		mapping, err := e.mapper.RESTMapping(t.gvk.GroupKind(), t.gvk.Version)
		if err != nil {
			if !meta.IsNoMatchError(err) {
				return out, fmt.Errorf("map kind %s: %w", t.gvk, err)
			}
			out.unmapped = true
			out.templates = append(out.templates, templateOutcome{message: fmt.Sprintf(
				"couldn't find mapping resource with kind %s (%s), please check if you have CRD deployed", t.gvk.Kind, t.gvk.GroupVersion())})
			continue
		}
		t.resource = mapping.Resource.Resource
		t.namespaced = mapping.Scope.Name() == meta.RESTScopeNameNamespace

		scopes := []string{""}
		if t.namespaced {
			out.usesNamespaces = true
			switch {
			case t.namespace != "":
				scopes = []string{t.namespace}
			case selectsAnything(p.Spec.NamespaceSelector):
				if !namespacesListed {
					if namespaces, err = e.namespaces(ctx); err != nil {
						return out, err
					}
					namespacesListed = true
				}
				if scopes, err = selectNamespaces(p.Spec.NamespaceSelector, namespaces); err != nil {
					out.templates = append(out.templates, templateOutcome{message: err.Error()})
					continue
				}
			default:
				out.templates = append(out.templates, templateOutcome{message: fmt.Sprintf(
					"namespaced object %s of kind %s has no namespace specified from the policy namespaceSelector nor the object metadata", orDash(t.name), t.gvk.Kind)})
				continue
			}
		}
		var results []objectResult
		for _, ns := range scopes {
			ref := watchRef{gvk: t.gvk, name: t.name, namespace: ns}
			if err := e.watch(ctx, client.ObjectKeyFromObject(p), ref); err != nil {
				return out, fmt.Errorf("watch %s in %q: %w", t.gvk, ns, err)
			}
			out.refs = append(out.refs, ref)
			r, err := e.evaluateIn(ctx, t, ns, enforce)
			if errors.Is(err, errRequeue) {
				return out, err
			}
			if err != nil {
				// A kind the controller may not list, or whose informer cannot sync, is the
				// user's to see; once the informer syncs its events re-evaluate the policy.
				results = nil
				out.templates = append(out.templates, templateOutcome{message: err.Error()})
				break
			}
			results = append(results, r...)
		}
		if results != nil {
			out.templates = append(out.templates, outcomeOf(t, results))
		}
	}
	return out, nil
}

// template is an object template decoded and normalised for evaluation.
type template struct {
	object                    map[string]any
	gvk                       schema.GroupVersionKind
	name, namespace, resource string
	namespaced                bool
	complianceType            policyv1.ComplianceType
	onlyHave, metadataOnly    bool
	selector                  *metav1.LabelSelector
	recreate                  policyv1.RecreateOption
	recordDiff                policyv1.RecordDiff
}

func (e *evaluator) template(tmpl *policyv1.ObjectTemplate) (*template, error) {
	obj := map[string]any{}
	if err := json.Unmarshal(tmpl.ObjectDefinition.Raw, &obj); err != nil {
		return nil, fmt.Errorf("objectDefinition is not an object: %w", err)
	}
	u := unstructured.Unstructured{Object: obj}
	gvk := u.GroupVersionKind()
	if gvk.Kind == "" || gvk.Version == "" {
		return nil, errors.New("objectDefinition needs apiVersion and kind")
	}
	ctype := policyv1.ComplianceType(strings.ToLower(string(tmpl.ComplianceType)))
	meta := strings.ToLower(string(tmpl.MetadataComplianceType))
	if meta == "" {
		meta = string(ctype)
	}
	return &template{
		object: obj, gvk: gvk, name: u.GetName(), namespace: u.GetNamespace(),
		complianceType: ctype,
		onlyHave:       ctype == policyv1.MustOnlyHave,
		metadataOnly:   meta == string(policyv1.MustOnlyHave),
		selector:       tmpl.ObjectSelector,
		recreate:       tmpl.RecreateOption,
		recordDiff:     effectiveRecordDiff(tmpl.RecordDiff, gvk.Group, gvk.Kind),
	}, nil
}

func (e *evaluator) namespaces(ctx context.Context) ([]namespaceInfo, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(schema.GroupVersionKind{Version: "v1", Kind: "NamespaceList"})
	if err := e.namespaceReader.List(ctx, list); err != nil {
		return nil, fmt.Errorf("list namespaces: %w", err)
	}
	out := make([]namespaceInfo, 0, len(list.Items))
	for _, ns := range list.Items {
		out = append(out, namespaceInfo{Name: ns.Name, Labels: ns.Labels})
	}
	return out, nil
}

func outcomeOf(t *template, results []objectResult) templateOutcome {
	out := templateOutcome{compliant: true, message: templateMessage(t.resource, results)}
	apiVersion := t.gvk.GroupVersion().String()
	for _, r := range results {
		if !r.state.compliant() {
			out.compliant = false
		}
		rel := policyv1.RelatedObject{
			Object: policyv1.ObjectResource{
				APIVersion: apiVersion, Kind: t.gvk.Kind,
				Metadata: policyv1.ObjectMetadata{Name: orDash(r.name), Namespace: r.namespace},
			},
			Compliant: complianceOf(r.state.compliant()),
			Reason:    r.state.relatedReason(),
		}
		if r.uid != "" || r.state == created || r.state == recreated {
			createdByPolicy := r.state == created || r.state == recreated
			rel.Properties = &policyv1.ObjectProperties{UID: r.uid, CreatedByPolicy: &createdByPolicy}
		}
		if r.diff != "" {
			if rel.Properties == nil {
				rel.Properties = &policyv1.ObjectProperties{}
			}
			rel.Properties.Diff = r.diff
		}
		out.related = append(out.related, rel)
	}
	return out
}

func complianceOf(ok bool) string {
	if ok {
		return string(policyv1.Compliant)
	}
	return string(policyv1.NonCompliant)
}

func orDash(name string) string {
	if name == "" {
		return "-"
	}
	return name
}

// requeueError wraps err so that the reconcile is retried instead of the error being reported.
func requeueError(what string, err error) error {
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("%s: %w: %w", what, errRequeue, err)
	}
	return nil
}
