// Package reports is the producers' side of Regent's per-resource reports (Kyverno's "reports
// v2"): a producer that evaluated policies against a resource calls Apply with the results per
// policy, and the resource's ResourceReport (or ClusterResourceReport) is created or updated:
// named by the resource's UID, owned by the resource so the garbage collector deletes it with the
// resource, labelled with the resource's identity and the version of every policy it holds results
// for. Desired is the same computation without a client. Classify turns a Kubewarden policy's
// severity and category annotations into what its results carry and the version they are at. Package aggregate merges the reports into
// openreports.io Reports.
package reports
