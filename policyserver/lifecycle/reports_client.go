package lifecycle

import (
	"fmt"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
	"regent.dev/regent/reports/admission"
)

// withReportsClient gives admission reports a client of the replica's cluster when they have
// none. It is a client of its own, so its own rate limiter: a burst of report writes never
// delays the replica's Ready conditions.
func withReportsClient(o *admission.Options, cfg *rest.Config) (*admission.Options, error) {
	if o == nil || o.Client != nil {
		return o, nil
	}
	c, err := client.New(rest.CopyConfig(cfg), client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("admission reports client: %w", err)
	}
	out := *o
	out.Client = c
	return &out, nil
}
