package main

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/reports/admission"
)

// admissionReportFlags size the queue that writes reports of admission answers.
type admissionReportFlags struct {
	enabled bool
	opts    admission.Options
}

func (a *admissionReportFlags) register(f *pflag.FlagSet) {
	f.BoolVar(&a.enabled, "admission-reports", true, "write per-resource reports (reports.regent.dev) of the answers of monitor-mode policies and of protect-mode\n"+
		"policies with reportAdmission, off the admission path; without --lifecycle only when a Kubernetes configuration is found")
	f.IntVar(&a.opts.Capacity, "admission-reports-queue", admission.DefaultCapacity, "answers, and resources, waiting for their report write; beyond it answers are dropped (counted), never waited for")
	f.IntVar(&a.opts.Workers, "admission-reports-workers", admission.DefaultWorkers, "report writes at once")
	f.DurationVar(&a.opts.Delay, "admission-reports-delay", admission.DefaultDelay, "how long a resource's answers wait for more before its report is written: a burst costs one write")
}

// lifecycleOptions are the queue's options with --lifecycle, which gives it the cluster's client.
func (a *admissionReportFlags) lifecycleOptions() *admission.Options {
	if !a.enabled {
		return nil
	}
	return &a.opts
}

// fileModeOptions are the queue's options without --lifecycle: reports need a cluster, so with
// no Kubernetes configuration they are off (said once in the log), as policies' lookups fail.
func (a *admissionReportFlags) fileModeOptions(ctx context.Context, kubeconfig string, limits kubeAPILimits, log logr.Logger) (*admission.Options, error) {
	if !a.enabled {
		return nil, nil
	}
	cfg, err := loadConfig(ctx, kubeconfig, limits)
	if err != nil {
		if kubeconfig != "" {
			return nil, fmt.Errorf("--kubeconfig: %w", err)
		}
		log.Info("no Kubernetes configuration found: admission reports are off", "reason", err.Error())
		return nil, nil
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("admission reports: %w", err)
	}
	o := a.opts
	o.Client = c
	return &o, nil
}
