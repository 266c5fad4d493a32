// Package apiserverwait holds a process back until its apiserver answers. A pod can start before
// its cluster's Service IP is routable (kube-proxy or the CNI still programming the node); the
// first request then times out, and a controller that gives up at setup exits and restarts. Waiting
// here, with the reason on the log, turns that race into a short delay.
package apiserverwait

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
)

// backoff is how often Reachable asks: soon at first, then every 10 s at most.
var backoff = wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 1 << 30, Cap: 10 * time.Second}

// Reachable returns once the apiserver of cfg answers /version, or with an error when ctx ends
// first. name says which apiserver in the log and the error (a process may talk to two).
func Reachable(ctx context.Context, cfg *rest.Config, name string, log logr.Logger) error {
	cfg = rest.CopyConfig(cfg)
	// One attempt must not outlive the backoff's cap: a black-holed route would hold it forever.
	cfg.Timeout = backoff.Cap
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return fmt.Errorf("%s apiserver: %w", name, err)
	}
	var last error
	attempts := 0
	err = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		attempts++
		// Not dc.ServerVersion: it takes no context, and a stopping process must not wait it out.
		last = dc.RESTClient().Get().AbsPath("/version").MaxRetries(0).Do(ctx).Error()
		// An answer with an HTTP status (401, 403, 500) is an apiserver that answers: what it
		// said is for the caller's own requests to report, not a reason to wait.
		var status apierrors.APIStatus
		if last != nil && !errors.As(last, &status) {
			log.Info("waiting for the apiserver", "apiserver", name, "host", cfg.Host, "attempt", attempts, "error", last.Error())
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("%s apiserver %s did not answer (%d attempts): %w", name, cfg.Host, attempts, last)
		}
		return fmt.Errorf("%s apiserver %s: %w", name, cfg.Host, err)
	}
	if attempts > 1 {
		log.Info("the apiserver answers", "apiserver", name, "attempts", attempts)
	}
	return nil
}
