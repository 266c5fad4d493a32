# METADATA
# title: EU/PCI placement
# description: Clusters a regulated workload may run on.
# labels:
#   team: platform
package placement.eu_pci

# Clusters in the EU whose PCI claim is 2 or more.
allowed contains name if {
	some name
	c := data.kubernetes.managedclusters[name]
	c.metadata.labels.region == "eu"
	some claim in c.status.clusterClaims
	claim.name == "pci.regent.dev"
	to_number(claim.value) >= 2
}

errors contains msg if {
	some name in input.clusters
	not allowed[name]
	msg := sprintf("cluster %s is not EU/PCI>=2", [name])
}

default decision := {"allowed": false}

# METADATA
# labels:
#   decision: "true"
decision := {"allowed": true, "clusters": sort([n | some n in allowed])} if count(errors) == 0

tainted := {name: keys |
	some name
	c := data.kubernetes.managedclusters[name]
	keys := [t.key | some t in c.spec.taints]
	count(keys) > 0
}

sets := {b.spec.clusterSet | some b in data.kubernetes.managedclustersetbindings[_]}
