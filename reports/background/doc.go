// Package background is the background scan of Regent's per-resource reports: objects that
// never passed admission with a policy (they existed before it, were created while its webhook
// failed open, or are static) still get results. It runs inside the policy server's elected
// leader and evaluates in process through the server's audit path, so a background result is the
// answer the audit endpoint would give, with no TLS hop.
//
// The scan covers the serving revisions of its own PolicyServer whose policy has
// backgroundAudit, each against the resources its rules name (operations including CREATE),
// within its namespace (AdmissionPolicy) and selectors. Each resource is read once from an
// informer of its kind and run through every policy that matches it, and its report is written
// once. A report records the generation each policy was evaluated at in its policy label, so on a
// policy change only reports whose label differs are recomputed; a deleted policy, one whose
// backgroundAudit was turned off or that no longer matches loses its results, and a report left
// with none is deleted. Namespace label changes, changes to a policy's context-aware inputs and a
// periodic interval re-queue what they affect. Results carry the policy's Kubewarden severity and
// category annotations (reports.Classify), which are part of the version the label records, so
// changing them redoes the policy's reports; an unknown severity is an Event on the policy.
package background
