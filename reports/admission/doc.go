// Package admission turns the policy server's admission answers into per-resource reports
// without slowing admission down. The request path hands each answer to a Queue with Offer, which
// never blocks: when the queue is full the answer is dropped and counted, and the background scan
// reports the resource later. Off the request path the queue reads what it needs from the
// AdmissionRequest (the resource's UID, kind, namespace and name), skips what cannot have a report
// (no UID yet, a DELETE, a subresource, a dry run), keeps one answer per admission request and
// policy (kube-apiserver may send a request twice), and keeps the latest answer per policy for
// each resource until the resource's results have waited Delay for more; then one of a few
// writers applies them all with one reports.Apply, which writes only when the report changes.
// Each result carries its policy's severity and category, read when the answer is filed from the
// policy's annotations (Options.Annotations) and part of the version the report records.
package admission
