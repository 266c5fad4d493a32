package templatesync

import (
	"slices"
	"strings"
)

// findCycle returns the dependency cycle through start, as the names along it ending with start
// again, or nil. edges maps each policy to the policies it depends on (directly, or through a
// template object another policy owns).
func findCycle(start string, edges map[string][]string) []string {
	var path []string
	visited := map[string]bool{}
	var walk func(string) bool
	walk = func(n string) bool {
		path = append(path, n)
		for _, next := range edges[n] {
			if next == start {
				path = append(path, start)
				return true
			}
			if !visited[next] {
				visited[next] = true
				if walk(next) {
					return true
				}
			}
		}
		path = path[:len(path)-1]
		return false
	}
	if walk(start) {
		return path
	}
	return nil
}

// cycleMessage spells a cycle the way a user reads it: "cycle: a → b → a".
func cycleMessage(cycle []string) string {
	return "cycle: " + strings.Join(slices.Clone(cycle), " → ")
}
