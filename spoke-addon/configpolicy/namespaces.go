package configpolicy

import (
	"fmt"
	"path/filepath"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	policyv1 "regent.dev/regent/api/policy/v1"
)

// namespaceInfo is what namespace selection needs to know of a namespace.
type namespaceInfo struct {
	Name   string
	Labels map[string]string
}

// selectNamespaces applies OCM's namespaceSelector rules: include and exclude are filepath
// patterns on the name, matchLabels and matchExpressions select by label, and all rules must
// hold. With only a label selector, include behaves as ["*"]; with neither, nothing is selected.
// The result is sorted so messages and status do not change with list order.
func selectNamespaces(sel policyv1.NamespaceSelector, namespaces []namespaceInfo) ([]string, error) {
	include := sel.Include
	var labelSel labels.Selector
	if sel.LabelSelector != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0) {
		s, err := metav1.LabelSelectorAsSelector(sel.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("namespaceSelector: %w", err)
		}
		labelSel = s
		if len(include) == 0 {
			include = []policyv1.NonEmptyString{"*"}
		}
	}
	for _, p := range append(append([]policyv1.NonEmptyString{}, include...), sel.Exclude...) {
		if _, err := filepath.Match(string(p), ""); err != nil {
			return nil, fmt.Errorf("namespaceSelector: pattern %q: %w", p, err)
		}
	}
	var out []string
	for _, ns := range namespaces {
		if !anyMatch(include, ns.Name) || anyMatch(sel.Exclude, ns.Name) {
			continue
		}
		if labelSel != nil && !labelSel.Matches(labels.Set(ns.Labels)) {
			continue
		}
		out = append(out, ns.Name)
	}
	sort.Strings(out)
	return out, nil
}

// selectsAnything reports whether the selector can select a namespace at all.
func selectsAnything(sel policyv1.NamespaceSelector) bool {
	return len(sel.Include) > 0 || (sel.LabelSelector != nil && (len(sel.MatchLabels) > 0 || len(sel.MatchExpressions) > 0))
}

func anyMatch(patterns []policyv1.NonEmptyString, name string) bool {
	for _, p := range patterns {
		if ok, _ := filepath.Match(string(p), name); ok {
			return true
		}
	}
	return false
}
