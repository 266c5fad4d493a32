package aggregate

import (
	"fmt"
	"hash/fnv"
)

// Shard is the slice of namespaces one aggregator owns: those whose FNV-1a hash is Index modulo
// Count. The zero value and {0, 1} own everything.
type Shard struct {
	Index, Count int
}

// ParseShard reads "i/n" with 0 <= i < n.
func ParseShard(s string) (Shard, error) {
	var sh Shard
	if _, err := fmt.Sscanf(s, "%d/%d", &sh.Index, &sh.Count); err != nil || fmt.Sprintf("%d/%d", sh.Index, sh.Count) != s {
		return Shard{}, fmt.Errorf("shard %q: want i/n, e.g. 0/2", s)
	}
	if sh.Count < 1 || sh.Index < 0 || sh.Index >= sh.Count {
		return Shard{}, fmt.Errorf("shard %q: want 0 <= i < n", s)
	}
	return sh, nil
}

// Owns says whether namespace ("" for the cluster scope) belongs to this shard.
func (s Shard) Owns(namespace string) bool {
	if s.Count <= 1 {
		return true
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(namespace))
	return int(h.Sum32()%uint32(s.Count)) == s.Index
}

func (s Shard) String() string {
	if s.Count <= 1 {
		return "0/1"
	}
	return fmt.Sprintf("%d/%d", s.Index, s.Count)
}
