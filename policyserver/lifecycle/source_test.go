package lifecycle

import (
	"context"
	"os"
	"testing"

	kubewardenv1 "regent.dev/regent/api/kubewarden/v1"
	"regent.dev/regent/policyserver/lifecycle/cache"
	"regent.dev/regent/policyserver/lifecycle/pull"
	"regent.dev/regent/policyserver/registry"
)

func TestPrepare_TheSameSourceIsCompiledOnce_AChangedOneAgain(t *testing.T) {
	file := writeFile(t, "p.rego", regoSource(t, "a"))
	rev := func(gen int64) revision {
		return revision{PolicyRevision: &kubewardenv1.PolicyRevision{}, spec: regoSpec(file), key: registry.Key{Name: "p", Generation: gen}}
	}
	memo := &compiledSources{}
	first, err := prepare(context.Background(), rev(1), pull.Options{FileRoots: []string{os.TempDir()}}, t.TempDir(), memo)
	if err != nil {
		t.Fatal(err)
	}
	// Marked, so a second compile could not return it.
	marked := first
	marked.Entrypoint = "from-the-memo"
	memo.byKey[memo.keys[0]] = marked
	second, err := prepare(context.Background(), rev(2), pull.Options{FileRoots: []string{os.TempDir()}}, t.TempDir(), memo)
	if err != nil {
		t.Fatal(err)
	}
	if second.Entrypoint != "from-the-memo" {
		t.Errorf("generation 2 of an unchanged source was compiled again")
	}
	if err := os.WriteFile(file, regoSource(t, "b"), 0o644); err != nil {
		t.Fatal(err)
	}
	third, err := prepare(context.Background(), rev(3), pull.Options{FileRoots: []string{os.TempDir()}}, t.TempDir(), memo)
	if err != nil {
		t.Fatal(err)
	}
	if third.Entrypoint == "from-the-memo" || third.ModuleDigest == first.ModuleDigest {
		t.Errorf("a changed source was served from the memo: %+v", third)
	}
}

func TestCompiledSources_KeepsTheLastFew(t *testing.T) {
	c := &compiledSources{}
	for i := range compiledSourcesKept + 1 {
		c.put(string(rune('a'+i)), cache.Source{ModuleDigest: string(rune('a' + i))})
	}
	if _, ok := c.get("a"); ok {
		t.Errorf("the oldest entry is still kept")
	}
	if src, ok := c.get(string(rune('a' + compiledSourcesKept))); !ok || src.ModuleDigest != string(rune('a'+compiledSourcesKept)) {
		t.Errorf("the newest entry is missing")
	}
	if len(c.byKey) != compiledSourcesKept || len(c.keys) != compiledSourcesKept {
		t.Errorf("%d entries, %d keys; want %d", len(c.byKey), len(c.keys), compiledSourcesKept)
	}
}
