// Package templates resolves OCM policy templates: Go text/template actions inside object
// definitions, with the function set of OCM's go-template-utils: fromSecret, fromConfigMap,
// fromClusterClaim, lookupClusterClaim, lookup, getNodesWithExactRoles, hasNodesWithExactRoles,
// copySecretData, copyConfigMapData, protect, atoi, toInt/toBool/toLiteral, indent/autoindent,
// base64, fromYAML/toYAML, and the sprig library (Masterminds/sprig v3, the one OCM uses) but env
// and expandenv, which fail as a security risk (and, in hub templates only, the functions whose
// result changes on every call, which would rewrite replicas without end). Where a name is both
// OCM's and sprig's, OCM's wins, as there (sprig.go).
//
// The same engine serves both sides: the spoke's ConfigurationPolicy controller resolves
// managed-cluster templates ("{{ ... }}") against its own cluster, and the hub's propagator
// resolves hub templates ("{{hub ... hub}}") per cluster against the hub: restricted to the root
// policy's namespace and the cluster's own ManagedCluster (Config.Namespace,
// Config.ClusterScopedAllowList), or, when the policy names a service account, to what its Reader
// lets that account read. Reads go through a Reader the caller supplies, so each side decides how a
// read is authorized and watched (the caller re-evaluates when what a template read changes).
//
// Object definitions are resolved as YAML text, as OCM does: the JSON is rendered to YAML, the
// template runs over the text and the result is parsed back. That is what lets a template emit
// structure (toLiteral, copySecretData, autoindent) and typed scalars (toInt, toBool).
//
// Hub templates never put a Secret's value on a replica in clear: fromSecret, copySecretData and
// protect encrypt under the managed cluster's key (encryption.go, OCM's format and names), and the
// managed cluster decrypts before its own templates run.
package templates
