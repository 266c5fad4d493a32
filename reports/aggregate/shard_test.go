package aggregate

import (
	"fmt"
	"testing"
)

func TestParseShard(t *testing.T) {
	for in, want := range map[string]Shard{"0/1": {0, 1}, "1/2": {1, 2}, "3/4": {3, 4}} {
		if got, err := ParseShard(in); err != nil || got != want {
			t.Errorf("ParseShard(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "1", "2/2", "-1/2", "0/0", "a/b", "1/2x", " 1/2"} {
		if _, err := ParseShard(in); err == nil {
			t.Errorf("ParseShard(%q) accepted", in)
		}
	}
}

func TestShard_EveryNamespaceHasExactlyOneOwner(t *testing.T) {
	shards := []Shard{{0, 3}, {1, 3}, {2, 3}}
	seen := make([]int, len(shards))
	for i := range 300 {
		ns := fmt.Sprintf("ns-%d", i)
		if i == 0 {
			ns = "" // the cluster scope is a namespace like the others
		}
		owners := 0
		for j, s := range shards {
			if s.Owns(ns) {
				owners++
				seen[j]++
			}
		}
		if owners != 1 {
			t.Fatalf("namespace %q has %d owners", ns, owners)
		}
		if !(Shard{}).Owns(ns) || !(Shard{0, 1}).Owns(ns) {
			t.Fatalf("a single aggregator does not own %q", ns)
		}
	}
	for j, n := range seen {
		if n == 0 {
			t.Errorf("shard %v owns none of 300 namespaces", shards[j])
		}
	}
}
