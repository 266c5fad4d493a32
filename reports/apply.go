package reports

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
)

// Apply makes the resource's report hold set's results (replacing those policies' earlier ones)
// and none of drop's, creating the report when missing. It writes only when the report changes and
// says whether it did; a conflicting concurrent write is retried on the latest version.
func Apply(ctx context.Context, c client.Client, res Resource, source reportsv1alpha1.Source, set []PolicyResults, drop []PolicyRef) (changed bool, err error) {
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		changed = false
		current := newReport(res.Namespace)
		err := c.Get(ctx, client.ObjectKey{Namespace: res.Namespace, Name: string(res.UID)}, current)
		switch {
		case apierrors.IsNotFound(err):
			if len(set) == 0 {
				return nil
			}
			changed = true
			return c.Create(ctx, Desired(nil, res, source, set, drop))
		case err != nil:
			return err
		}
		desired := Desired(current, res, source, set, drop)
		if sameReport(current, desired) {
			return nil
		}
		desired.SetResourceVersion(current.GetResourceVersion())
		changed = true
		return c.Update(ctx, desired)
	})
	if err != nil {
		return false, fmt.Errorf("write report of %s %s/%s: %w", res.Kind, res.Namespace, res.Name, err)
	}
	return changed, nil
}

func sameReport(a, b reportsv1alpha1.Object) bool {
	return equality.Semantic.DeepEqual(a.GetLabels(), b.GetLabels()) &&
		equality.Semantic.DeepEqual(a.GetAnnotations(), b.GetAnnotations()) &&
		equality.Semantic.DeepEqual(a.GetOwnerReferences(), b.GetOwnerReferences()) &&
		equality.Semantic.DeepEqual(a.ReportSpec(), b.ReportSpec())
}
