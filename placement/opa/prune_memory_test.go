package opa

import (
	"context"
	"encoding/base64"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/storage"
)

// registeredCluster is a ManagedCluster as the apiserver returns one for a registered cluster:
// labels, OCM's and kubectl's annotations, a CA bundle in spec, status with conditions, capacity,
// version and claims, and the server-set metadata (managedFields included).
func registeredCluster(i int) map[string]any {
	name := fmt.Sprintf("cluster-%05d", i)
	region := []string{"eu", "us", "ap"}[i%3]
	ca := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIRAK\n", 24)))
	cond := func(t string) any {
		return map[string]any{"type": t, "status": "True", "reason": t, "message": t + " for " + name, "lastTransitionTime": "2026-01-01T00:00:00Z"}
	}
	field := func(manager string) any {
		return map[string]any{"manager": manager, "operation": "Update", "apiVersion": "cluster.open-cluster-management.io/v1",
			"time": "2026-01-01T00:00:00Z", "fieldsType": "FieldsV1",
			"fieldsV1": map[string]any{"f:metadata": map[string]any{"f:labels": map[string]any{".": map[string]any{}, "f:region": map[string]any{}, "f:pci-level": map[string]any{}}},
				"f:status": map[string]any{"f:conditions": map[string]any{}, "f:capacity": map[string]any{}, "f:allocatable": map[string]any{}, "f:clusterClaims": map[string]any{}}}}
	}
	claim := func(n, v string) any { return map[string]any{"name": n, "value": v} }
	return map[string]any{
		"apiVersion": "cluster.open-cluster-management.io/v1", "kind": "ManagedCluster",
		"metadata": map[string]any{
			"name": name, "uid": fmt.Sprintf("6f1c2a4e-0000-4000-8000-%012d", i), "resourceVersion": fmt.Sprint(100000 + i),
			"generation": int64(1), "creationTimestamp": "2026-01-01T00:00:00Z",
			"labels": map[string]any{"region": region, "pci-level": fmt.Sprint(i % 4), "cloud": "Amazon", "vendor": "OpenShift", "name": name,
				"cluster.open-cluster-management.io/clusterset": "default", "feature.open-cluster-management.io/addon-regent": "available"},
			"annotations": map[string]any{
				"kubectl.kubernetes.io/last-applied-configuration": fmt.Sprintf(`{"apiVersion":"cluster.open-cluster-management.io/v1","kind":"ManagedCluster","metadata":{"labels":{"region":%q},"name":%q},"spec":{"hubAcceptsClient":true}}`, region, name),
				"open-cluster-management.io/created-via":           "other",
			},
			"finalizers":    []any{"cluster.open-cluster-management.io/api-resource-cleanup", "open-cluster-management.io/managedclusterrole"},
			"managedFields": []any{field("registration"), field("kubectl"), field("registration-agent")},
		},
		"spec": map[string]any{"hubAcceptsClient": true, "leaseDurationSeconds": int64(60),
			"managedClusterClientConfigs": []any{map[string]any{"url": "https://api." + name + ".example.com:6443", "caBundle": ca}}},
		"status": map[string]any{
			"conditions":    []any{cond("HubAcceptedManagedCluster"), cond("ManagedClusterJoined"), cond("ManagedClusterConditionAvailable"), cond("ManagedClusterConditionClockSynced")},
			"capacity":      map[string]any{"cpu": "96", "memory": "394Gi", "pods": "750", "ephemeral-storage": "1Ti"},
			"allocatable":   map[string]any{"cpu": "94", "memory": "380Gi", "pods": "750", "ephemeral-storage": "900Gi"},
			"version":       map[string]any{"kubernetes": "v1.35.4"},
			"clusterClaims": []any{claim("id.k8s.io", name), claim("platform.open-cluster-management.io", "AWS"), claim("region.open-cluster-management.io", region), claim("pci.regent.dev", "2")},
		},
	}
}

// storeHeap is the live heap an in-memory store holding n clusters adds, with or without pruning.
func storeHeap(t testing.TB, n int, pruned bool) uint64 {
	t.Helper()
	ctx := context.Background()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	store := NewEngine().Store()
	for i := range n {
		obj := registeredCluster(i)
		if pruned {
			obj = prune("managedclusters", obj)
		}
		if err := writePath(ctx, store, storage.Path{InventoryRoot, "managedclusters", fmt.Sprintf("cluster-%05d", i)}, obj); err != nil {
			t.Fatal(err)
		}
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(store)
	if after.HeapAlloc < before.HeapAlloc {
		return 0
	}
	return after.HeapAlloc - before.HeapAlloc
}

// BenchmarkInventoryMemory reports the heap 10,000 replicated ManagedClusters take in the engine's
// store, pruned as the inventory prunes them and whole (what the apiserver sends, managedFields
// included): the figure behind prune.go's choice of what to keep.
//
//	go test -run '^$' -bench InventoryMemory -benchtime 1x ./placement/opa/
func BenchmarkInventoryMemory(b *testing.B) {
	const n = 10000
	for _, pruned := range []bool{true, false} {
		name := "whole"
		if pruned {
			name = "pruned"
		}
		b.Run(name, func(b *testing.B) {
			var heap uint64
			for range b.N {
				heap = storeHeap(b, n, pruned)
			}
			b.ReportMetric(float64(heap)/(1<<20), "MiB/10k-clusters")
			b.ReportMetric(float64(heap)/n, "B/cluster")
		})
	}
}

// TestPruneKeepsWhatPlacementReads: a registered cluster keeps what placement policies read and
// loses the bookkeeping that makes up most of its size.
func TestPruneKeepsWhatPlacementReads(t *testing.T) {
	got := prune("managedclusters", registeredCluster(7))
	md := got["metadata"].(map[string]any)
	for _, k := range []string{"managedFields", "uid", "resourceVersion", "finalizers", "creationTimestamp", "generation"} {
		if _, ok := md[k]; ok {
			t.Errorf("metadata.%s kept", k)
		}
	}
	if ann := md["annotations"].(map[string]any); len(ann) != 1 || ann["open-cluster-management.io/created-via"] == nil {
		t.Errorf("annotations %v, want only open-cluster-management.io/created-via", ann)
	}
	if md["labels"].(map[string]any)["region"] != "us" {
		t.Errorf("labels %v lost region", md["labels"])
	}
	st := got["status"].(map[string]any)
	if len(st) != 2 || st["conditions"] == nil || st["clusterClaims"] == nil {
		t.Errorf("status keeps %v, want conditions and clusterClaims", st)
	}
	if got["spec"].(map[string]any)["hubAcceptsClient"] != true {
		t.Errorf("spec not kept whole: %v", got["spec"])
	}
}
