// Package templatesync creates each template of a managed cluster's policies — a
// ConfigurationPolicy, an admission policy, any kind with a compliance status — owned by the
// policy, but only while the template's dependencies hold (OCM's "ordering of policy template
// processing"): dependencies ∪ extraDependencies name objects whose compliance must match. When
// they stop holding the template is deleted and the policy reports Pending with a message naming
// each unmet dependency; a dependency cycle is named instead of leaving everything Pending.
// Dependencies and templates are watched, never polled. The policy's status — per-template
// compliance with a short history, the aggregate, and the hub generation evaluated — is what
// status sync reports to the hub; it is first written when a template reports a compliance (or
// is Pending, or fails), never for a template that merely exists yet.
package templatesync
