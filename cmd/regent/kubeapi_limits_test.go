package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/rest"

	"regent.dev/regent/hub"
	"regent.dev/regent/policyserver/lifecycle"
	spokeaddon "regent.dev/regent/spoke-addon"
)

// errConfigSeen stops a command once it has loaded the configurations a test looks at.
var errConfigSeen = errors.New("configuration seen")

// loadedConfigs runs regent with args until it has loaded want configurations, and returns them.
func loadedConfigs(t *testing.T, want int, args ...string) ([]*rest.Config, error) {
	t.Helper()
	var seen []*rest.Config
	ctx, cancel := context.WithCancel(context.WithValue(context.Background(), configLoadedKey{}, func(cfg *rest.Config) error {
		seen = append(seen, cfg)
		if len(seen) == want {
			return errConfigSeen
		}
		return nil
	}))
	defer cancel()
	root := newRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if errors.Is(err, errConfigSeen) {
		err = nil
	}
	return seen, err
}

func writeKubeconfig(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kubeconfig := "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: 'https://127.0.0.1:1'}}]\n" +
		"users: [{name: u, user: {token: t}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}]\ncurrent-context: x\n"
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

type limit struct {
	qps   float32
	burst int
}

// Every component that talks to an apiserver takes --kube-api-qps/--kube-api-burst (the spoke
// addon --hub-kube-api-* too, for its second apiserver), and what is given is what its clients
// are built with; unset, each has its documented default.
func TestKubeAPILimits_ReachTheRestConfigOfEveryComponent(t *testing.T) {
	kc := writeKubeconfig(t)
	dir := t.TempDir()
	cases := []struct {
		name string
		args []string
		want []limit // per configuration, in the order the command loads them
	}{
		{"hub default", []string{"hub", "--kubeconfig", kc}, []limit{{hub.DefaultQPS, hub.DefaultBurst}}},
		{"hub", []string{"hub", "--kubeconfig", kc, "--kube-api-qps=7", "--kube-api-burst=9"}, []limit{{7, 9}}},
		{"hub, old names", []string{"hub", "--kubeconfig", kc, "--qps=7", "--burst=9"}, []limit{{7, 9}}},
		{"spoke-addon default", []string{"spoke-addon", "--hub-kubeconfig", kc, "--kubeconfig", kc, "--cluster-name", "c1"},
			[]limit{{spokeaddon.DefaultHubQPS, spokeaddon.DefaultHubBurst}, {spokeaddon.DefaultLocalQPS, spokeaddon.DefaultLocalBurst}}},
		{"spoke-addon", []string{"spoke-addon", "--hub-kubeconfig", kc, "--kubeconfig", kc, "--cluster-name", "c1",
			"--kube-api-qps=7", "--kube-api-burst=9", "--hub-kube-api-qps=3", "--hub-kube-api-burst=4"}, []limit{{3, 4}, {7, 9}}},
		{"policy-server --lifecycle default", []string{"policy-server", "--lifecycle", "--kubeconfig", kc, "--shared-cache", dir},
			[]limit{{lifecycle.DefaultQPS, lifecycle.DefaultBurst}}},
		{"policy-server --lifecycle, leader identity too", []string{"policy-server", "--lifecycle", "--kubeconfig", kc, "--leader-kubeconfig", kc,
			"--shared-cache", dir, "--kube-api-qps=7", "--kube-api-burst=9"}, []limit{{7, 9}, {7, 9}}},
		{"policy-server with a policies file", []string{"policy-server", "--policies", filepath.Join(dir, "policies.yml"), "--kubeconfig", kc,
			"--kube-api-qps=7", "--kube-api-burst=9"}, []limit{{7, 9}}},
		{"reports-aggregator default", []string{"reports-aggregator", "--kubeconfig", kc}, []limit{{reportsAggregatorQPS, reportsAggregatorBurst}}},
		{"reports-aggregator", []string{"reports-aggregator", "--kubeconfig", kc, "--kube-api-qps=7", "--kube-api-burst=9"}, []limit{{7, 9}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfgs, err := loadedConfigs(t, len(c.want), c.args...)
			if err != nil {
				t.Fatal(err)
			}
			if len(cfgs) != len(c.want) {
				t.Fatalf("loaded %d configurations, want %d", len(cfgs), len(c.want))
			}
			for i, cfg := range cfgs {
				if cfg.QPS != c.want[i].qps || cfg.Burst != c.want[i].burst {
					t.Errorf("configuration %d: QPS %v burst %d, want %v and %d", i, cfg.QPS, cfg.Burst, c.want[i].qps, c.want[i].burst)
				}
			}
		})
	}
}

// A positive rate with an empty bucket would let no request through: refused before starting.
func TestKubeAPILimits_ABurstOfZeroWithARateIsRefused(t *testing.T) {
	kc := writeKubeconfig(t)
	for _, args := range [][]string{
		{"hub", "--kubeconfig", kc, "--kube-api-burst=0"},
		{"spoke-addon", "--hub-kubeconfig", kc, "--cluster-name", "c1", "--hub-kube-api-burst=0"},
		{"policy-server", "--lifecycle", "--kubeconfig", kc, "--kube-api-burst=0"},
		{"reports-aggregator", "--kubeconfig", kc, "--kube-api-burst=0"},
	} {
		cfgs, err := loadedConfigs(t, 1, args...)
		if err == nil || !strings.Contains(err.Error(), "kube-api-burst must be at least 1") || len(cfgs) != 0 {
			t.Errorf("%v: loaded %d configurations, error %v", args, len(cfgs), err)
		}
	}
	// No limit at all (a negative rate) needs no bucket.
	if cfgs, err := loadedConfigs(t, 1, "hub", "--kubeconfig", kc, "--kube-api-qps=-1", "--kube-api-burst=0"); err != nil || cfgs[0].QPS != -1 {
		t.Errorf("--kube-api-qps=-1: %v", err)
	}
}
