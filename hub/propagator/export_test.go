package propagator

import (
	"context"
	"strconv"

	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// Expectations gives the tests outside the package the hub's write expectations, fed by an
// informer of their own.
type Expectations struct{ x expectations }

func NewExpectations(c clock.PassiveClock) *Expectations {
	return &Expectations{x: expectations{clock: c}}
}

// Progress is the handler the hub adds to its Policy informer.
func (e *Expectations) Progress() toolscache.ResourceEventHandler { return e.x.progress() }

func (e *Expectations) Wrote(key types.NamespacedName, before, after string) {
	e.x.wrote(key, before, after)
}

// Mark is taken before a read of the cache; Pending compares what that read showed.
func (e *Expectations) Mark() any { return e.x.mark() }

// MarkReading is Mark for a reconcile of the root whose replicas are named replica: until its
// comparison, the informer's events leave their expectations to it.
func (e *Expectations) MarkReading(replica string) any { return e.x.markReading(replica) }

func (e *Expectations) Pending(key types.NamespacedName, cachedRV string, mark any) bool {
	return e.x.pending(key, cachedRV, mark.(cacheMark))
}

// Seen is the highest resourceVersion the handler has been given, or "" before any: the store
// takes an object before the handler hears of it, so a test that saw an object in the cache waits
// for this too before it marks a read.
func (e *Expectations) Seen() string {
	m := e.x.mark()
	if !m.tracking {
		return ""
	}
	return strconv.FormatUint(m.seen, 10)
}

// PatchRootStatus is the hub's write of a root's status, root being the hub's cached copy.
func PatchRootStatus(ctx context.Context, c client.Client, root *policyv1.Policy, status *policyv1.PolicyStatus) error {
	return (&Reconciler{Client: c}).patchRootStatus(ctx, root, status)
}

// DecideAgain is the requeue of a root whose recorded decision does not settle.
const DecideAgain = decideAgain
