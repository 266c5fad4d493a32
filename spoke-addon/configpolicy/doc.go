// Package configpolicy is the ConfigurationPolicy controller of the spoke addon. It evaluates each
// ConfigurationPolicy's object templates against the managed cluster with the semantics of OCM's
// config-policy-controller (musthave, mustonlyhave, mustnothave; inform or enforce), writes the
// compliance per template and per related object into the policy's status, and re-evaluates a
// policy when an object it looks at changes: every kind a template names gets a watch, started the
// first time a policy needs it, so evaluation follows the cluster instead of a polling loop.
//
// OCM's lifecycle and reporting fields behave as in OCM:
//   - pruneObjectBehavior (prune.go): an enforced policy with DeleteAll or DeleteIfCreated holds the
//     finalizer policy.open-cluster-management.io/delete-related-objects; when it is deleted — or
//     withdrawn by template sync because a dependency stopped holding, which is a delete — its
//     last status's related objects are deleted (DeleteIfCreated: only those createdByPolicy, by
//     UID). An object an enforced policy stops matching (a template removed) is pruned the same
//     way. Switching to inform or None drops the finalizer: nothing is pruned.
//   - recreateOption (evaluate_object.go): Always deletes and recreates instead of updating;
//     IfRequired does so when the apiserver refuses the update as invalid (immutable fields);
//     None reports OCM's "cannot be updated, likely due to immutable fields" violation.
//   - recordDiff (diff.go): InStatus (the default) puts a unified YAML diff in
//     relatedObjects[].properties.diff; Log logs it; ConfigMaps and Secrets are censored unless
//     set explicitly, and a Secret's diff never reaches the status.
//   - customMessage (custom_message.go): Go templates over .DefaultMessage and .Policy (related
//     objects in full, from the cache) give the message of compliance events; a broken template
//     keeps the default message and says why.
//
// The comparison itself (compare.go, compare_object.go) is pure: it takes maps and returns a
// verdict and the object to write, and knows nothing about clients.
package configpolicy
