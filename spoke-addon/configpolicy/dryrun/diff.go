package dryrun

import (
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// diff is the unified diff of an object's YAML before and after a change, headed as OCM's dryrun
// heads it ("<ns>/<name> : existing", "... : updated"). The in-memory cluster's resourceVersion
// is left out: it changes with every write and says nothing about the policy.
func diff(namespace, name string, before, after client.Object) string {
	id := name
	if namespace != "" {
		id = namespace + "/" + name
	}
	d, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: lines(objectYAML(before)), B: lines(objectYAML(after)),
		FromFile: id + " : existing", ToFile: id + " : updated", Context: 3,
	})
	if err != nil {
		return err.Error()
	}
	return d
}

func lines(s string) []string {
	if s == "" {
		return nil
	}
	return difflib.SplitLines(strings.TrimSuffix(s, "\n"))
}

func objectYAML(obj client.Object) string {
	if obj == nil {
		return ""
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return err.Error()
	}
	if meta, ok := m["metadata"].(map[string]any); ok {
		delete(meta, "resourceVersion")
	}
	// A null top-level field (status: null in a merged object) is what the apiserver ignores in
	// a write; showing it as a change would be noise.
	for k, v := range m {
		if v == nil {
			delete(m, k)
		}
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
