package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkGatekeeperInventory measures the unique-ingress-host template over an inventory of
// 1000 Ingresses: "steady" evaluates against an unchanged inventory, "changed" upserts one
// Ingress before every evaluation (the instance patches that object into its data).
func BenchmarkGatekeeperInventory(b *testing.B) {
	tmpl, err := os.ReadFile(filepath.Join("..", "testdata", "gatekeeper", "uniqueingresshost", "template.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	ct, err := ParseConstraintTemplate(tmpl)
	if err != nil {
		b.Fatal(err)
	}
	module, err := CompileRego(context.Background(), ct.Files, ct.Entrypoint, true)
	if err != nil {
		b.Fatal(err)
	}
	ingress := func(ns, name, host string) []byte {
		return fmt.Appendf(nil, `{"apiVersion":"networking.k8s.io/v1","kind":"Ingress","metadata":{"name":%q,"namespace":%q,"labels":{"app":%q}},"spec":{"rules":[{"host":%q,"http":{"paths":[{"path":"/","pathType":"Prefix","backend":{"service":{"name":"web","port":{"number":80}}}}]}}]}}`, name, ns, name, host)
	}
	inv := NewInventory()
	for i := range 1000 {
		if err := inv.Upsert(ingress(fmt.Sprintf("ns-%d", i%50), fmt.Sprintf("ing-%d", i), fmt.Sprintf("h%d.example.com", i))); err != nil {
			b.Fatal(err)
		}
	}
	e := newTestEngine(b, Options{MaxInstancesPerPolicy: 1})
	p := load(b, e, Spec{Module: module, ExecutionMode: ModeGatekeeper, Entrypoint: ct.Entrypoint, Inventory: inv})
	req := []byte(`{"uid":"1","kind":{"group":"networking.k8s.io","version":"v1","kind":"Ingress"},"operation":"CREATE","object":` +
		string(ingress("team-a", "new", "new.example.com")) + `}`)
	ctx := context.Background()
	b.Run("steady", func(b *testing.B) {
		for b.Loop() {
			if r, err := p.Validate(ctx, req); err != nil || !r.Accepted {
				b.Fatal(r, err)
			}
		}
	})
	b.Run("changed", func(b *testing.B) {
		i := 0
		for b.Loop() {
			i++
			if err := inv.Upsert(ingress("ns-0", "ing-0", fmt.Sprintf("moved%d.example.com", i))); err != nil {
				b.Fatal(err)
			}
			if r, err := p.Validate(ctx, req); err != nil || !r.Accepted {
				b.Fatal(r, err)
			}
		}
	})
}
