package main

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// kubeAPILimits are the client-side rate limits of a process's connection to one apiserver,
// under the flag names OCM's agents and controllers use (--kube-api-qps, --kube-api-burst), so
// every subcommand that talks to an apiserver is tuned the same way.
type kubeAPILimits struct {
	QPS   float32
	Burst int
}

// register adds --<prefix>kube-api-qps and --<prefix>kube-api-burst with the given defaults;
// apiserver names the server they limit in the help.
func (l *kubeAPILimits) register(f *pflag.FlagSet, prefix, apiserver string, qps float32, burst int) {
	f.Float32Var(&l.QPS, prefix+"kube-api-qps", qps, "requests per second to "+apiserver+" (negative: no limit)")
	f.IntVar(&l.Burst, prefix+"kube-api-burst", burst, "request burst to "+apiserver)
}

func (l kubeAPILimits) check(prefix string) error {
	// client-go's token bucket with an empty bucket never lets a request through.
	if l.QPS > 0 && l.Burst < 1 {
		return fmt.Errorf("--%skube-api-burst must be at least 1 while --%skube-api-qps is positive", prefix, prefix)
	}
	return nil
}

// configLoadedKey carries, in a command's context, a function that sees every configuration the
// command loads and may stop it there with an error: how tests learn what a command would
// connect with, without starting it.
type configLoadedKey struct{}

// loadConfig reads a kubeconfig file, or when path is empty the usual places: $KUBECONFIG,
// ~/.kube/config, then the in-cluster service account; limits become the configuration's.
func loadConfig(ctx context.Context, path string, limits kubeAPILimits) (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = limits.QPS, limits.Burst
	if seen, ok := ctx.Value(configLoadedKey{}).(func(*rest.Config) error); ok {
		if err := seen(cfg); err != nil {
			return nil, err
		}
	}
	return cfg, nil
}
