// Package opa is Regent's embedded OPA for placement: Rego modules loaded from ConfigMaps
// (labelled regent.dev/placement-policy=rego, one module per data key, hot reloaded), the hub's
// inventory (ManagedClusters, ManagedClusterSets, ManagedClusterSetBindings, AddOnPlacementScores,
// and any GVR added by configuration) replicated into OPA's in-memory store, and an HTTPS query API
// in OPA's REST shape (POST/GET /v1/data/<path>) authenticated by TokenReview and authorized by
// SubjectAccessReview on the hub.
//
// Decisions, written down because policies and clients depend on them:
//
//   - Policy loading follows kube-mgmt: the outcome is written on the ConfigMap in the annotation
//     openpolicyagent.org/kube-mgmt-status, {"status":"ok"} or {"status":"error","error":{...}} where
//     the error is OPA's REST error body (code, message, errors with location file/row/col), and an
//     Event on the ConfigMap says the same. Module ids are <namespace>/<configmap>/<key>, as in
//     kube-mgmt.
//   - A ConfigMap whose new content does not compile together with the others changes nothing:
//     the engine keeps serving the last set that compiled, including that ConfigMap's previous good
//     version (OPA's PUT /v1/policies behaves the same way: a failed upsert leaves the old module).
//     One bad module therefore never unloads good ones. Deleting a ConfigMap whose functions other
//     modules still call keeps its modules loaded (logged) until those callers change.
//   - Every hub replica runs its own engine and API (no leader election): the data is read-only
//     and the status annotation each replica writes is the same.
//   - Inventory lives where kube-mgmt replicates: data.kubernetes.<resource>.<namespace>.<name> for
//     namespaced objects and data.kubernetes.<resource>.<name> for cluster-scoped ones (resource is
//     the plural, e.g. managedclusters). Each watch event writes or removes that one path.
//   - What is kept of an object (see prune.go): apiVersion, kind, metadata name/namespace/labels,
//     annotations only under regent.dev/ and open-cluster-management.io/, the whole spec, and from
//     status only conditions plus what placement reads per kind (ManagedCluster clusterClaims,
//     AddOnPlacementScore scores and validUntil). managedFields, resourceVersion, uid and the rest
//     of status never reach the store, nor the informers' caches (they are pruned the same way).
//     How it is decided: kept is what OCM's own placement reads to select clusters (labels, claims,
//     taints and the rest of spec, addon scores) plus conditions and Regent's and OCM's
//     annotations; dropped is what the apiserver and other controllers keep for themselves
//     (bookkeeping, kubectl's last-applied copy, capacity and version). A policy that reads a
//     dropped field sees it undefined. Measured (BenchmarkInventoryMemory, registered-looking
//     clusters): 7.6 KB a cluster in the store pruned against 15.4 KB whole.
//   - The query API authorizes like the apiserver does for non-resource URLs: a SubjectAccessReview
//     with nonResourceAttributes path=/v1/data/<path> and verb = the lower-cased HTTP method (get,
//     post), so RBAC grants it with nonResourceURLs: ["/v1/data/*"], verbs: ["get","post"].
//     Decisions are cached for a few seconds per (token, verb, path).
//   - Placements are admitted by a mutating webhook served on the API's listener (AdmissionPath):
//     the package --placement-admission-package (default regent.placement) is evaluated with
//     input {operation, placement (as its author wrote it), namespace {name, labels}}; its
//     errors deny, its annotations are merged (the answer wins), and its requiredClusterSelector
//     or predicates are ANDed into every predicate of the Placement (OCM ORs predicates), the
//     author's part and Regent's kept apart in AppliedAnnotation so the merge is a fixed point.
//     Failures deny once any placement policy ConfigMap exists and admit while none does;
//     transient ones are retried within a budget. The remediator re-evaluates every Placement
//     when the policies or the inventory change and patches those whose answer changed (or, dry
//     run, only reports them). docs/placement-admission.md is the user's guide.
package opa
