// Package secretsync brings the cluster's policy encryption key from the hub: the Secret
// policy-encryption-key the hub's propagator keeps in the cluster namespace (the key hub templates
// encrypt copied Secret values with, and the previous key after a rotation) is copied to the same
// namespace on the managed cluster, where the ConfigurationPolicy controller decrypts with it, as
// OCM's governance-policy-framework addon does for its config-policy-controller. Only the data
// is copied; a Secret that leaves the hub leaves the cluster.
package secretsync
