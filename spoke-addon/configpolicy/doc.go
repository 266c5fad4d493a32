// Package configpolicy is the ConfigurationPolicy controller of the spoke addon. It evaluates each
// ConfigurationPolicy's object templates against the managed cluster with the semantics of OCM's
// config-policy-controller (musthave, mustonlyhave, mustnothave; inform or enforce), writes the
// compliance per template and per related object into the policy's status, and re-evaluates a
// policy when an object it looks at changes: every kind a template names gets a watch, started the
// first time a policy needs it, so evaluation follows the cluster instead of a polling loop.
//
// The comparison itself (compare.go, compare_object.go) is pure: it takes maps and returns a
// verdict and the object to write, and knows nothing about clients.
package configpolicy
