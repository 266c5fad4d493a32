// Package crds embeds the CustomResourceDefinitions Regent installs: its own, generated from the
// markers in api/ by `make generate`, and OCM's cluster and addon CRDs copied from the pinned
// open-cluster-management.io/api module, so a fleet or an installer needs no files beside the
// binary.
package crds

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed *.yaml ocm/*.yaml ocm-agents/*.yaml
var files embed.FS

// Regent returns Regent's own CRDs and the openreports.io Report and ClusterReport CRDs its report
// aggregator writes.
func Regent() ([]*apiextensionsv1.CustomResourceDefinition, error) { return load(".") }

// OCM returns OCM's cluster and addon CRDs (ManagedCluster, ManagedClusterSet(Binding), Placement,
// PlacementDecision, AddOnPlacementScore, ClusterManagementAddOn, ManagedClusterAddOn,
// AddOnDeploymentConfig) and ManifestWork, which addon managers deliver agents with.
func OCM() ([]*apiextensionsv1.CustomResourceDefinition, error) { return load("ocm") }

// OCMAgents returns what OCM's own hub controllers and agents need beyond OCM(): AddOnTemplate,
// ClusterClaim and AppliedManifestWork.
func OCMAgents() ([]*apiextensionsv1.CustomResourceDefinition, error) { return load("ocm-agents") }

// All returns Regent's and OCM's CRDs.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	own, err := Regent()
	if err != nil {
		return nil, err
	}
	ocm, err := OCM()
	if err != nil {
		return nil, err
	}
	return append(own, ocm...), nil
}

func load(dir string) ([]*apiextensionsv1.CustomResourceDefinition, error) {
	names, err := fs.Glob(files, path.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(names))
	for _, name := range names {
		raw, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(raw, crd); err != nil {
			return nil, fmt.Errorf("crd %s: %w", name, err)
		}
		out = append(out, crd)
	}
	return out, nil
}
