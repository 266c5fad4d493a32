package propagator

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// The echo of the hub's status patch of a root is dropped; an event of the root before it is not,
// and one after it ends the record.
func TestRootVersions_TheEchoOfTheHubsStatusPatchIsDropped(t *testing.T) {
	key := types.NamespacedName{Namespace: "team", Name: "p"}
	var v rootVersions
	v.patched(key, "4", "5")
	if v.echo(key, "4") {
		t.Fatal("an event of the version the patch replaced was taken for its echo")
	}
	if !v.echo(key, "5") {
		t.Fatal("the patch's echo was not recognised")
	}
	if v.echo(key, "5") {
		t.Fatal("the echo was recognised twice")
	}
	v.patched(key, "5", "7")
	if v.echo(key, "9") || v.echo(key, "7") {
		t.Fatal("an event past the patch left its record, or was taken for its echo")
	}
	v.patched(key, "9", "10")
	v.awaited(key)
	if v.echo(key, "10") {
		t.Fatal("an echo a reconcile awaits was dropped")
	}
}

// reads is a cache the test scripts: each Get returns the next resourceVersion of the root.
type reads struct{ versions []string }

func (r *reads) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	obj.SetNamespace(key.Namespace)
	obj.SetName(key.Name)
	obj.SetResourceVersion(r.versions[0])
	r.versions = r.versions[1:]
	return nil
}

func (r *reads) List(context.Context, client.ObjectList, ...client.ListOption) error { return nil }

// A reconcile that finds its root behind the hub's last status patch waits for the patch's echo;
// an echo dropped while it read the root is in the cache by the time it reads it again.
func TestAwaitEcho_AReconcileBehindItsPatchIsRequeuedByTheEchoOrReadsIt(t *testing.T) {
	key := types.NamespacedName{Namespace: "team", Name: "p"}
	stale := func() *policyv1.Policy {
		p := &policyv1.Policy{}
		p.Namespace, p.Name, p.ResourceVersion = key.Namespace, key.Name, "4"
		return p
	}
	t.Run("echo still to come", func(t *testing.T) {
		r := &Reconciler{Reader: &reads{versions: []string{"4"}}}
		r.statusWrites.patched(key, "4", "5")
		if behind, err := r.awaitEcho(context.Background(), key, stale()); err != nil || !behind {
			t.Fatalf("behind %v, err %v: the cache shows the version before the patch", behind, err)
		}
		if r.statusWrites.echo(key, "5") {
			t.Fatal("the echo the reconcile waits for was dropped")
		}
	})
	t.Run("echo dropped during the read", func(t *testing.T) {
		r := &Reconciler{Reader: &reads{versions: []string{"5"}}}
		r.statusWrites.patched(key, "4", "5")
		root := stale()
		if !r.statusWrites.echo(key, "5") {
			t.Fatal("the echo was not recognised")
		}
		if behind, err := r.awaitEcho(context.Background(), key, root); err != nil || behind || root.ResourceVersion != "5" {
			t.Fatalf("behind %v, err %v, root at %s: the second read shows the patch", behind, err, root.ResourceVersion)
		}
	})
}
