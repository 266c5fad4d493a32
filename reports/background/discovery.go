package background

import (
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
)

// discover lists every kind the apiserver can list and watch, each group's preferred version
// first. A group whose discovery fails (an aggregated API that is down) is left out and named in
// the error; the others are returned.
func discover(d discovery.DiscoveryInterface) ([]resourceType, error) {
	groups, lists, err := d.ServerGroupsAndResources()
	if err != nil && !discovery.IsGroupDiscoveryFailedError(err) {
		return nil, fmt.Errorf("discovery: %w", err)
	}
	byGV := map[string]*metav1.APIResourceList{}
	for _, l := range lists {
		byGV[l.GroupVersion] = l
	}
	var out []resourceType
	for _, g := range groups {
		versions := []string{g.PreferredVersion.Version}
		for _, v := range g.Versions {
			if v.Version != g.PreferredVersion.Version {
				versions = append(versions, v.Version)
			}
		}
		for _, v := range versions {
			gv := schema.GroupVersion{Group: g.Name, Version: v}
			l := byGV[gv.String()]
			if l == nil {
				continue
			}
			for _, r := range l.APIResources {
				if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") || !slices.Contains(r.Verbs, "watch") {
					continue
				}
				out = append(out, resourceType{gvr: gv.WithResource(r.Name), kind: r.Kind, namespaced: r.Namespaced})
			}
		}
	}
	if err != nil {
		return out, fmt.Errorf("discovery (the other groups are scanned): %w", err)
	}
	return out, nil
}
