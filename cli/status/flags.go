package status

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"regent.dev/regent/api/scheme"
)

// Flags are kubectl's connection flags (--kubeconfig, --context, -n/--namespace, --server, …),
// from cli-runtime so they behave exactly as kubectl's do, KUBECONFIG included.
type Flags struct {
	*genericclioptions.ConfigFlags
}

// NewFlags returns kubectl's connection flags with nothing set.
func NewFlags() *Flags {
	return &Flags{ConfigFlags: genericclioptions.NewConfigFlags(true)}
}

// AddTo registers the flags on fs.
func (f *Flags) AddTo(fs *pflag.FlagSet) { f.ConfigFlags.AddFlags(fs) }

// Namespace is -n when given, else the kubeconfig context's namespace, else "default".
func (f *Flags) Namespace() (string, error) {
	ns, _, err := f.ToRawKubeConfigLoader().Namespace()
	if err != nil {
		return "", fmt.Errorf("namespace from kubeconfig: %w", err)
	}
	return ns, nil
}

// Client connects to the cluster the flags name, knowing every kind Regent reads.
func (f *Flags) Client() (client.WithWatch, error) {
	cfg, err := f.ToRESTConfig()
	if err != nil {
		return nil, fmt.Errorf("kubeconfig: %w", err)
	}
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: scheme.Scheme})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.Host, err)
	}
	return c, nil
}
