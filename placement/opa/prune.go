package opa

import "strings"

// keptAnnotationPrefixes are the annotation keys a placement policy may read; the rest (kubectl's
// last-applied-configuration, controllers' bookkeeping) is large and never a placement fact.
var keptAnnotationPrefixes = []string{"regent.dev/", "open-cluster-management.io/"}

// keptStatus names, per resource, the status fields kept beside conditions: what OCM's own
// placement reads (cluster claims, addon scores).
var keptStatus = map[string][]string{
	"managedclusters":      {"clusterClaims"},
	"addonplacementscores": {"scores", "validUntil"},
}

// prune returns the part of an object (unstructured content) that is replicated: apiVersion, kind,
// metadata name/namespace/labels and kept annotations, the whole spec, and status conditions plus
// the kind's kept status fields.
func prune(resource string, obj map[string]any) map[string]any {
	out := map[string]any{}
	for _, k := range []string{"apiVersion", "kind", "spec"} {
		if v, ok := obj[k]; ok {
			out[k] = v
		}
	}
	if md, ok := obj["metadata"].(map[string]any); ok {
		m := map[string]any{}
		for _, k := range []string{"name", "namespace", "labels"} {
			if v, ok := md[k]; ok {
				m[k] = v
			}
		}
		if ann, ok := md["annotations"].(map[string]any); ok {
			kept := map[string]any{}
			for k, v := range ann {
				for _, p := range keptAnnotationPrefixes {
					if strings.HasPrefix(k, p) {
						kept[k] = v
						break
					}
				}
			}
			if len(kept) > 0 {
				m["annotations"] = kept
			}
		}
		out["metadata"] = m
	}
	if st, ok := obj["status"].(map[string]any); ok {
		s := map[string]any{}
		for _, k := range append([]string{"conditions"}, keptStatus[resource]...) {
			if v, ok := st[k]; ok {
				s[k] = v
			}
		}
		if len(s) > 0 {
			out["status"] = s
		}
	}
	return out
}
