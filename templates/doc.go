// Package templates resolves OCM policy templates: Go text/template actions inside object
// definitions, with the function set OCM documents (fromSecret, fromConfigMap, fromClusterClaim,
// lookup, copySecretData, toInt/toBool/toLiteral, indent/autoindent, base64 and a subset of sprig).
//
// The same engine serves both sides: the spoke's ConfigurationPolicy controller resolves
// managed-cluster templates ("{{ ... }}") against its own cluster, and the hub's propagator
// resolves hub templates ("{{hub ... hub}}") per cluster against the hub, restricted to the root
// policy's namespace. Reads go through a Reader the caller supplies, so each side decides how a
// read is watched (the caller re-evaluates when what a template read changes).
//
// Object definitions are resolved as YAML text, as OCM does: the JSON is rendered to YAML, the
// template runs over the text and the result is parsed back. That is what lets a template emit
// structure (toLiteral, copySecretData, autoindent) and typed scalars (toInt, toBool).
//
// Hub templates never put a Secret's value on a replica in clear: fromSecret, copySecretData and
// protect encrypt under the managed cluster's key (encryption.go, OCM's format and names), and the
// managed cluster decrypts before its own templates run.
package templates
