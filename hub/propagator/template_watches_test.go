package propagator

import (
	"context"
	"fmt"
	"sort"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

func TestTemplateWatches_AnObjectRequeuesTheRootsThatReadItsNamespace(t *testing.T) {
	cm := corev1.SchemeGroupVersion.WithKind("ConfigMap")
	own := types.NamespacedName{Namespace: "team1", Name: "own-namespace"}
	withSA := types.NamespacedName{Namespace: "team1", Name: "reads-shared"}
	everywhere := types.NamespacedName{Namespace: "team2", Name: "lists-all-namespaces"}
	w := &templateWatches{readers: map[schema.GroupVersionKind]map[types.NamespacedName]map[string]bool{cm: {
		own:        {"team1": true},
		withSA:     {"team1": true, "shared": true},
		everywhere: {"": true},
	}}}
	cases := []struct {
		namespace string
		want      []types.NamespacedName
	}{
		{"team1", []types.NamespacedName{everywhere, withSA, own}},
		{"shared", []types.NamespacedName{everywhere, withSA}},
		{"elsewhere", []types.NamespacedName{everywhere}},
	}
	for _, tc := range cases {
		obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: tc.namespace, Name: "x"}}
		var got []types.NamespacedName
		for _, req := range w.rootsReading(cm)(context.Background(), obj) {
			got = append(got, req.NamespacedName)
		}
		sort.Slice(got, func(i, j int) bool { return got[i].String() > got[j].String() })
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("a ConfigMap in %s requeues %v, want %v", tc.namespace, got, tc.want)
		}
	}
	// A kind no template read requeues nothing.
	if reqs := w.rootsReading(corev1.SchemeGroupVersion.WithKind("Secret"))(context.Background(), &corev1.Secret{}); len(reqs) != 0 {
		t.Errorf("an unread kind requeues %v", reqs)
	}
}
