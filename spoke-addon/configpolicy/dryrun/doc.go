// Package dryrun answers, without a cluster, what a ConfigurationPolicy would report and change
// against a set of objects, like OCM's `dryrun` command: the objects are put into an in-memory
// cluster and the spoke addon's own evaluation (configpolicy.EvaluateOnce) runs against it, so
// the compliance, the per-template messages and the related objects are the controller's, worded
// as OCM words them. Nothing here compares objects.
//
// The policy is evaluated twice, each time against a fresh copy of the objects: as inform, for
// what it reports (OCM's dryrun reports the same way, whatever the policy's remediationAction),
// and as enforce, for what it would change — every create, update and delete it makes is recorded
// and an update is shown as a unified diff of the object before and after.
//
// The in-memory cluster is not an apiserver: it applies no defaults, so a mustonlyhave template
// that leaves out a field the apiserver would default is reported as not matching. A namespaced
// object given without a namespace is put in "default" (which, like every namespace an object
// uses, exists). Kinds are those of client-go's scheme plus the kinds of the objects given; a
// template of any other kind is reported as a kind the cluster does not serve.
package dryrun
