package cache

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// GC removes the entries, under every version, whose key is not in keep (the keys of the
// enabled revisions), and returns what it removed. Staging directories are left alone: a build
// may be in flight.
func (c Cache) GC(keep map[string]bool) ([]string, error) {
	return c.removeDirs("gc", func(name string) bool {
		return !strings.HasPrefix(name, ".") && !keep[name]
	})
}

// RemoveStaging removes the staging directories (dot directories beside the entries) under
// every version, and returns what it removed. Only a leader that just started may call it: a
// build in flight stages there.
func (c Cache) RemoveStaging() ([]string, error) {
	return c.removeDirs("remove staging", func(name string) bool { return strings.HasPrefix(name, ".") })
}

// removeDirs removes the directories under every version whose name remove selects, and returns
// them as <version>/<name>.
func (c Cache) removeDirs(what string, remove func(name string) bool) ([]string, error) {
	versions, err := os.ReadDir(c.Root)
	if os.IsNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%s in %s: %w", what, c.Root, err)
	}
	var removed []string
	for _, v := range versions {
		if !v.IsDir() {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(c.Root, v.Name()))
		if err != nil {
			return removed, fmt.Errorf("%s in %s: %w", what, v.Name(), err)
		}
		for _, e := range entries {
			if !e.IsDir() || !remove(e.Name()) {
				continue
			}
			dir := filepath.Join(c.Root, v.Name(), e.Name())
			if err := os.RemoveAll(dir); err != nil {
				return removed, fmt.Errorf("%s %s: %w", what, dir, err)
			}
			removed = append(removed, filepath.Join(v.Name(), e.Name()))
		}
	}
	return removed, nil
}
