package engine_test

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/verify"
	"regent.dev/regent/test/corpora"
)

// TestGatekeeper_OwnSuites runs Regent's own gator suites (policyserver/testdata/gatekeeper).
func TestGatekeeper_OwnSuites(t *testing.T) {
	suites, err := filepath.Glob(filepath.Join("..", "testdata", "gatekeeper", "*", "suite.yaml"))
	if err != nil || len(suites) < 2 {
		t.Fatalf("found %d suites under ../testdata/gatekeeper (err %v)", len(suites), err)
	}
	runGatorSuites(t, suites)
}

// TestGatekeeper_LibrarySuites runs every case of every suite.yaml in the gatekeeper-library
// corpus and expects the violations gator expects.
func TestGatekeeper_LibrarySuites(t *testing.T) {
	library := corpora.Dir(t, "gatekeeper-library")
	suites, err := filepath.Glob(filepath.Join(library, "library", "*", "*", "suite.yaml"))
	if err != nil || len(suites) == 0 {
		t.Fatalf("no suites under %s (err %v)", library, err)
	}
	runGatorSuites(t, suites)
}

// runGatorSuites runs gator suite files through `regent verify`'s runner (package verify), one
// subtest per case, and fails when no case ran at all.
func runGatorSuites(t *testing.T, suites []string) {
	report, err := verify.Run(context.Background(), suites, verify.Options{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, s := range report.Suites {
		if s.Error != "" {
			t.Errorf("%s: %s", s.Path, s.Error)
		}
		for _, c := range s.Cases {
			t.Run(filepath.Base(filepath.Dir(s.Path))+"/"+c.Name, func(t *testing.T) {
				switch {
				case c.Failure != "":
					t.Error(c.Failure)
				case c.Skipped != "":
					t.Skip(c.Skipped)
				}
			})
			if c.Failure == "" && c.Skipped == "" {
				ran++
			}
		}
	}
	if ran == 0 {
		t.Errorf("no case of %d suites passed", len(suites))
	}
}

// A package path may be written as a ref (package lib["x-y"]): the entrypoint must be where OPA
// puts the rules, or the template never compiles.
func TestGatekeeper_PackageWrittenAsRef_CompilesAtOPAsPath(t *testing.T) {
	doc := "apiVersion: templates.gatekeeper.sh/v1\nkind: ConstraintTemplate\nspec:\n  targets:\n  - rego: |\n      package k8s[\"required-labels\"] # a ref\n      violation[{\"msg\": \"m\"}] { input.review.object.kind == \"Pod\" }\n"
	ct, err := engine.ParseConstraintTemplate([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if ct.Entrypoint != "k8s/required-labels/violation" {
		t.Errorf("entrypoint %q", ct.Entrypoint)
	}
	if _, err := engine.CompileRego(context.Background(), ct.Files, ct.Entrypoint, true); err != nil {
		t.Fatal(err)
	}
}

// A loaded policy follows its inventory as it changes: an Ingress added makes the same host a
// violation, its removal (as when it is deleted from the cluster) lifts it, without reloading.
func TestGatekeeper_Inventory_ChangesReachLoadedPolicy(t *testing.T) {
	ctx := context.Background()
	tmpl, err := os.ReadFile(filepath.Join("..", "testdata", "gatekeeper", "uniqueingresshost", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ct, err := engine.ParseConstraintTemplate(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	module, err := engine.CompileRego(ctx, ct.Files, ct.Entrypoint, true)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(ctx, engine.Options{MaxInstancesPerPolicy: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	inv := engine.NewInventory()
	p, err := e.Load(ctx, engine.Spec{Name: "unique", Module: module, ExecutionMode: engine.ModeGatekeeper, Entrypoint: ct.Entrypoint, Inventory: inv})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	ingress := func(ns, name, host string) []byte {
		return []byte(`{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"` + name + `","namespace":"` + ns + `"},"spec":{"rules":[{"host":"` + host + `"}]}}`)
	}
	review := func(obj []byte) []byte {
		return []byte(`{"uid":"1","kind":{"group":"networking.k8s.io","version":"v1","kind":"Ingress"},"operation":"CREATE","object":` + string(obj) + `}`)
	}
	violations := func(want int) {
		t.Helper()
		r, err := p.Validate(ctx, review(ingress("a", "shop", "shop.example.com")))
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Violations) != want {
			t.Fatalf("got violations %q, want %d", r.Violations, want)
		}
	}
	violations(0)
	if err := inv.Upsert(ingress("b", "old", "shop.example.com")); err != nil {
		t.Fatal(err)
	}
	if err := inv.Upsert(ingress("c", "blog", "blog.example.com")); err != nil {
		t.Fatal(err)
	}
	violations(1)
	// A bigger inventory than the first, parsed where the first was.
	for i := range 200 {
		if err := inv.Upsert(ingress("d", "filler-"+strconv.Itoa(i), "h"+strconv.Itoa(i)+".example.com")); err != nil {
			t.Fatal(err)
		}
	}
	violations(1)
	inv.Delete("networking.k8s.io/v1", "Ingress", "b", "old")
	violations(0)
	if err := inv.Upsert(ingress("b", "old", "shop.example.com")); err != nil {
		t.Fatal(err)
	}
	violations(1)
	inv.DeleteKind("networking.k8s.io/v1", "Ingress")
	violations(0)
	if inv.Len() != 0 {
		t.Errorf("inventory holds %d objects after DeleteKind", inv.Len())
	}
}

// Only gatekeeper policies read an inventory; an opa policy given one is refused, not silently
// served without it.
func TestGatekeeper_Inventory_RefusedForOPAMode(t *testing.T) {
	ctx := context.Background()
	module, err := engine.CompileRego(ctx, map[string]string{"p.rego": "package p\nimport rego.v1\nallow := true\n"}, "p/allow", false)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(ctx, engine.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	if _, err := e.Load(ctx, engine.Spec{Name: "p", Module: module, ExecutionMode: engine.ModeOPA, Inventory: engine.NewInventory()}); err == nil {
		t.Error("an opa policy was loaded with an inventory")
	}
}

// Patching the loaded data object by object must give what a full load gives: after each of a
// seeded random run of upserts and deletes (and past the change log's bound, which forces a
// reload), the violations are those counted from the objects in Go.
func TestGatekeeper_Inventory_PatchedDataMatchesTheObjects(t *testing.T) {
	ctx := context.Background()
	tmpl, err := os.ReadFile(filepath.Join("..", "testdata", "gatekeeper", "uniqueingresshost", "template.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	ct, err := engine.ParseConstraintTemplate(tmpl)
	if err != nil {
		t.Fatal(err)
	}
	module, err := engine.CompileRego(ctx, ct.Files, ct.Entrypoint, true)
	if err != nil {
		t.Fatal(err)
	}
	e, err := engine.New(ctx, engine.Options{MaxInstancesPerPolicy: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(ctx)
	inv := engine.NewInventory()
	p, err := e.Load(ctx, engine.Spec{Name: "unique", Module: module, ExecutionMode: engine.ModeGatekeeper, Entrypoint: ct.Entrypoint, Inventory: inv})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	review := []byte(`{"uid":"1","kind":{"group":"networking.k8s.io","version":"v1","kind":"Ingress"},"operation":"CREATE","object":` +
		`{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"new","namespace":"x"},"spec":{"rules":[{"host":"h0"}]}}}`)
	hosts := map[string]string{} // "ns/name" → host
	rng := rand.New(rand.NewPCG(1, 2))
	for step := range 1500 {
		ns, name := "ns"+strconv.Itoa(rng.IntN(3)), "i"+strconv.Itoa(rng.IntN(10))
		if rng.IntN(3) == 0 {
			inv.Delete("networking.k8s.io/v1", "Ingress", ns, name)
			delete(hosts, ns+"/"+name)
		} else {
			host := "h" + strconv.Itoa(rng.IntN(3))
			obj := `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":"` + name + `","namespace":"` + ns + `"},"spec":{"rules":[{"host":"` + host + `"}]}}`
			if err := inv.Upsert([]byte(obj)); err != nil {
				t.Fatal(err)
			}
			hosts[ns+"/"+name] = host
		}
		// Most steps evaluate at once (one patch); a stretch in the middle lets the changes
		// pile up past the log, so the instance reloads.
		if step > 200 && step < 1300 {
			continue
		}
		want := 0
		for _, h := range hosts {
			if h == "h0" {
				want++
			}
		}
		r, err := p.Validate(ctx, review)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Violations) != want {
			t.Fatalf("step %d: %d violations, want %d", step, len(r.Violations), want)
		}
	}
}
