package placement.bench

# The benchmark's placement question: may a workload that must stay in the EU on PCI level 2 or
# more run on these clusters? Looks up only the clusters asked about, as an admission check does.
eligible(name) if {
	c := data.kubernetes.managedclusters[name]
	c.metadata.labels.region == "eu"
	to_number(c.metadata.labels["pci-level"]) >= 2
}

errors contains msg if {
	some name in input.clusters
	not eligible(name)
	msg := sprintf("cluster %s is not EU/PCI>=2", [name])
}

decision := {"allowed": count(errors) == 0, "errors": errors}

# Whole-inventory questions, for readiness and for the export.
clusters := count(data.kubernetes.managedclusters)
