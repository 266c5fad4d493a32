package policyserver

import (
	"context"
	"strconv"

	reportsv1alpha1 "regent.dev/regent/api/reports/v1alpha1"
	"regent.dev/regent/policyserver/registry"
	"regent.dev/regent/reports"
	"regent.dev/regent/reports/admission"
)

// admissionReports hands the answers of the policies that report them to a queue writing
// per-resource reports; a server without one (nil) reports nothing.
type admissionReports struct {
	queue *admission.Queue
	stop  context.CancelFunc
	done  chan struct{}
}

func startAdmissionReports(ctx context.Context, opts *admission.Options, m *metrics, s *Server) error {
	if opts == nil {
		return nil
	}
	o := *opts
	o.Registerer, o.Logger = m.registry, s.log.WithName("admission-reports")
	q, err := admission.New(o)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &admissionReports{queue: q, stop: cancel, done: make(chan struct{})}
	go func() { q.Run(ctx); close(r.done) }()
	s.reports = r
	return nil
}

func (r *admissionReports) close() {
	if r != nil {
		r.stop()
		<-r.done
	}
}

// reportRef is the policy a served policy's admission answers are reported under, nil when they
// are not reported: a monitor-mode policy's always are, a protect-mode policy's when it asks
// (reportAdmission), a mutating policy's never (its webhook sees the object before it is final
// and, on create, before it has a UID). Revisions carry the policy's identity in ReportAs; a
// policy of a policies file is a cluster-wide policy named as in the file.
func reportRef(name string, pc PolicyConfig, mode PolicyMode) *reports.PolicyRef {
	if pc.Mutating || pc.AllowedToMutate || (mode != ModeMonitor && !pc.ReportAdmission) {
		return nil
	}
	if pc.ReportAs != nil {
		ref := *pc.ReportAs
		return &ref
	}
	return &reports.PolicyRef{Scope: reportsv1alpha1.PolicyScopeCluster, Name: name}
}

// reportAnswer hands a validation's answer to the report queue without waiting: an audit call
// is the background scan's, which writes its own reports.
func (s *Server) reportAnswer(p *servedPolicy, key registry.Key, audit bool, request []byte, outcome, message string) {
	if s.reports == nil || p.report == nil || audit {
		return
	}
	result := admission.Pass
	switch outcome {
	case "rejected":
		result = admission.Fail
	case "error":
		result = admission.Error
	}
	s.reports.queue.Offer(admission.Evaluation{
		Request: request, Policy: *p.report, Version: strconv.FormatInt(key.Generation, 10),
		Monitor: p.mode == ModeMonitor, Result: result, Message: message,
	})
}
