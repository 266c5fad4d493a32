package placement.eu_pci

# Clusters a regulated workload may run on: EU region and PCI level 2 or more.
allowed contains name if {
	some name
	c := data.kubernetes.managedclusters[name]
	c.metadata.labels.region == "eu"
	to_number(c.metadata.labels["pci-level"]) >= 2
}

errors contains msg if {
	some name in input.clusters
	not allowed[name]
	msg := sprintf("cluster %s is not EU/PCI>=2", [name])
}

default decision := {"allowed": false}

decision := {"allowed": true, "clusters": sort([n | some n in allowed])} if count(errors) == 0
