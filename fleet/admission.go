package fleet

import (
	"context"
	"fmt"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/admission"
	policyv1 "regent.dev/regent/api/policy/v1"
	"regent.dev/regent/api/scheme"
)

// installAdmission creates the hub's admission policies, as an install does with the CRDs, and
// waits until the apiserver enforces them: it loads a new policy in the background, and a test
// that ran before would see the hub accept what it refuses.
func installAdmission(ctx context.Context, hub *rest.Config) error {
	cl, err := client.New(hub, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return err
	}
	objs, err := admission.Hub()
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := cl.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("admission policy %s: %w", o.GetName(), err)
		}
	}
	// A root whose <namespace>.<name> exceeds a label value, tried without being stored.
	probe := &policyv1.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: strings.Repeat("x", 56)},
		Spec: policyv1.PolicySpec{PolicyTemplates: []*policyv1.PolicyTemplate{}}}
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := cl.Create(ctx, probe.DeepCopy(), client.DryRunAll)
		return apierrors.IsInvalid(err) || apierrors.IsForbidden(err), nil
	})
}
