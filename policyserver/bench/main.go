package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"regent.dev/regent/policyserver"
	"regent.dev/regent/policyserver/internal/guests"
	"regent.dev/regent/policyserver/selfsigned"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "serve" {
		if err := serve(os.Args[2:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	opaBin := flag.String("opa", "", "OPA binary to compare with (`opa run --server`); empty skips the comparison")
	duration := flag.Duration("duration", 10*time.Second, "measured time per run")
	warmup := flag.Duration("warmup", 2*time.Second, "unmeasured time before each run")
	concurrencies := flag.String("c", "1,16", "concurrencies (connections) to measure")
	policyWorkers := flag.Int("policy-workers", 0, "the policy server's --policy-workers (0: its default, workers-1)")
	sweep := flag.String("sweep", "", "open-loop rates, from:to:step (500:3000:250) or a list; set, the bench runs only the sweep (and -cpuprofile)")
	bounds := flag.String("p99-bound", "10ms,50ms", "the sweep's latency bounds, ascending: a rate passes one with p99 at most it and every answer correct; a knee is given for each")
	stopAfter := flag.Int("stop-after-fails", 2, "the sweep drives a server no higher after this many failing rates in a row")
	cpuprofile := flag.String("cpuprofile", "", "profile the policy server (Rego path) at -profile-rate into this file; with -sweep, after it")
	profileRate := flag.Float64("profile-rate", 1000, "open-loop rate of the -cpuprofile run")
	profileDuration := flag.Duration("profile-duration", 30*time.Second, "measured time of the -cpuprofile run (a profile samples every 10 ms of CPU: a longer run, more samples)")
	profilePolicy := flag.String("profile-policy", "opa", "the policy the -cpuprofile run drives: opa (Rego → wasm) or wapc-fastjson")
	cpuRates := flag.String("cpu-rates", "", "measure each server's CPU per request at these open-loop rates (from:to:step or a list) instead of the other tables")
	cpuRounds := flag.Int("cpu-rounds", 3, "rounds of the -cpu-rates runs (the order of the servers rotates each round)")
	flag.Parse()
	if *cpuRates != "" {
		rates, err := parseRates(*cpuRates)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		if err := cpuRun(*opaBin, cpuOptions{rates: rates, rounds: max(*cpuRounds, 1), warmup: *warmup, duration: *duration}, *policyWorkers); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *sweep != "" || *cpuprofile != "" {
		var o sweepOptions
		if *sweep != "" {
			rates, err := parseRates(*sweep)
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench:", err)
				os.Exit(2)
			}
			o = sweepOptions{rates: rates, warmup: *warmup, duration: *duration, stopAfter: *stopAfter}
			for _, b := range strings.Split(*bounds, ",") {
				d, err := time.ParseDuration(b)
				if err != nil {
					fmt.Fprintln(os.Stderr, "bench: -p99-bound:", err)
					os.Exit(2)
				}
				o.bounds = append(o.bounds, d)
			}
			slices.Sort(o.bounds)
		}
		if err := openLoop(*opaBin, o, profile{path: *cpuprofile, policy: *profilePolicy, rate: *profileRate, duration: *profileDuration}, *policyWorkers); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if err := bench(*opaBin, *duration, *warmup, *concurrencies, *policyWorkers); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// serve runs the policy server, as `regent policy-server` would.
func serve(args []string) error {
	fs := flag.NewFlagSet("serve", flag.ExitOnError)
	var o policyserver.Options
	fs.StringVar(&o.Addr, "addr", "127.0.0.1:0", "listen address")
	fs.StringVar(&o.CertFile, "cert", "", "certificate file")
	fs.StringVar(&o.KeyFile, "key", "", "key file")
	fs.StringVar(&o.PoliciesFile, "policies", "", "policies file")
	fs.StringVar(&o.CacheDir, "cache", "", "compilation cache directory")
	fs.IntVar(&o.PolicyWorkers, "policy-workers", 0, "evaluations of one policy at once")
	cpuprofile := fs.String("cpuprofile", "", "write the server's CPU profile, from start to SIGTERM, to this file")
	_ = fs.Parse(args)
	o.ReloadInterval = -1
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if *cpuprofile != "" {
		f, err := os.Create(*cpuprofile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	return policyserver.Run(ctx, o)
}

// workspace holds the modules, policies and certificates a run uses.
type workspace struct {
	dir   string
	certs selfsigned.Files
	cache string
	// policyWorkers is passed to the server: its default share leaves one worker to other
	// policies, so a one-policy run measures less than the server's whole capacity.
	policyWorkers int
}

func bench(opaBin string, duration, warmup time.Duration, concurrencies string, policyWorkers int) error {
	ws, done, err := newWorkspace(policyWorkers)
	if err != nil {
		return err
	}
	defer done()
	var cs []int
	for _, s := range strings.Split(concurrencies, ",") {
		c, err := strconv.Atoi(s)
		if err != nil {
			return fmt.Errorf("concurrency %q: %w", s, err)
		}
		cs = append(cs, c)
	}

	fmt.Printf("# Policy server benchmark\n\n%s\n\n", machine())
	if err := ws.compileTable(); err != nil {
		return err
	}
	if err := ws.rssTable(); err != nil {
		return err
	}
	return ws.loadTable(opaBin, cs, warmup, duration)
}

// profile is the -cpuprofile run: the server's CPU profile while one policy is driven at a rate.
type profile struct {
	path, policy string
	rate         float64
	duration     time.Duration
}

// cpuRun measures CPU per request (cpuTable) instead of the closed-loop tables.
func cpuRun(opaBin string, o cpuOptions, policyWorkers int) error {
	ws, done, err := newWorkspace(policyWorkers)
	if err != nil {
		return err
	}
	defer done()
	fmt.Printf("# Policy server: CPU per request\n\n%s\n\n", machine())
	return ws.cpuTable(opaBin, o)
}

// openLoop runs the open-loop sweep (when it has rates) and the profiled point (when a profile
// is asked for) instead of the closed-loop tables.
func openLoop(opaBin string, o sweepOptions, prof profile, policyWorkers int) error {
	ws, done, err := newWorkspace(policyWorkers)
	if err != nil {
		return err
	}
	defer done()
	fmt.Printf("# Policy server: open-loop sweep\n\n%s\n\n", machine())
	if len(o.rates) > 0 {
		if err := ws.sweepTable(opaBin, o); err != nil {
			return err
		}
	}
	if prof.path != "" {
		return ws.profilePoint(prof, 2*time.Second)
	}
	return nil
}

// newWorkspace writes the modules and certificates of a run into a temporary folder, removed by
// the returned func.
func newWorkspace(policyWorkers int) (workspace, func(), error) {
	dir, err := os.MkdirTemp("", "regent-bench-")
	if err != nil {
		return workspace{}, nil, err
	}
	done := func() { os.RemoveAll(dir) }
	ws := workspace{dir: dir, cache: filepath.Join(dir, "cache"), policyWorkers: policyWorkers}
	if ws.certs, err = selfsigned.Write(dir, "127.0.0.1"); err != nil {
		done()
		return ws, nil, err
	}
	if err := ws.writeModules(); err != nil {
		done()
		return ws, nil, err
	}
	return ws, done, nil
}

// The policies under test: one per runtime, all admitting the same two-container pod, so every
// request runs the policy to the end.
var runtimes = []struct{ name, policy string }{
	{"waPC (Go reactor)", "wapc"},
	{"WASI (Go command)", "wasi"},
	{"OPA (Rego → wasm)", "opa"},
	{"Gatekeeper (template → wasm)", "gatekeeper"},
}

func (ws workspace) policyYAML(names ...string) string {
	all := map[string]string{
		"wapc":          "wapc:\n  module: wapc-labels.wasm\n  settings: {required: [team]}\n",
		"wapc-fastjson": "wapc-fastjson:\n  module: wapc-labels-fastjson.wasm\n  settings: {required: [team]}\n",
		"wasi":          "wasi:\n  module: wasi-privileged.wasm\n  executionMode: wasi\n",
		"opa":           "opa:\n  module: disallow-latest.rego\n  executionMode: opa\n",
		"gatekeeper":    "gatekeeper:\n  module: allowedrepos.yaml\n  executionMode: gatekeeper\n  settings: {repos: [\"docker.io/\"]}\n",
	}
	var b strings.Builder
	for _, n := range names {
		b.WriteString(all[n])
	}
	if b.Len() == 0 {
		return "{}\n"
	}
	return b.String()
}

func (ws workspace) writeModules() error {
	for _, g := range []string{"wapc-labels", "wapc-labels-fastjson", "wasi-privileged"} {
		b, err := guests.Build(g)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(ws.dir, g+".wasm"), b, 0o644); err != nil {
			return err
		}
	}
	root, err := guests.RepoRoot()
	if err != nil {
		return err
	}
	for dst, src := range map[string]string{
		"disallow-latest.rego": filepath.Join(root, "policyserver", "testdata", "rego", "disallow-latest.rego"),
		"allowedrepos.yaml":    filepath.Join(root, "policyserver", "testdata", "gatekeeper", "allowedrepos", "template.yaml"),
	} {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(ws.dir, dst), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// podRequest is the AdmissionRequest every run evaluates.
func podRequest() json.RawMessage {
	b, _ := json.Marshal(map[string]any{
		"uid":       "705ab4f5-6393-11e8-b7cc-42010a800002",
		"kind":      map[string]any{"group": "", "version": "v1", "kind": "Pod"},
		"resource":  map[string]any{"group": "", "version": "v1", "resource": "pods"},
		"operation": "CREATE", "namespace": "default", "name": "web",
		"userInfo": map[string]any{"username": "alice", "groups": []string{"system:authenticated"}},
		"object": map[string]any{
			"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "web", "namespace": "default", "labels": map[string]string{"team": "a", "app": "web"}},
			"spec": map[string]any{"containers": []map[string]any{
				{"name": "web", "image": "docker.io/nginx:1.27", "ports": []map[string]any{{"containerPort": 80}}},
				{"name": "proxy", "image": "docker.io/envoyproxy/envoy:v1.30.1"},
			}},
		},
	})
	return b
}

// process is a server under test in a child process.
type process struct {
	pid  int
	addr string
	stop func() error
}

func (ws workspace) startRegent(config string, extra ...string) (*process, error) {
	policies := filepath.Join(ws.dir, fmt.Sprintf("policies-%d.yml", time.Now().UnixNano()))
	if err := os.WriteFile(policies, []byte(config), 0o644); err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	args := append([]string{"serve", "-addr", addr, "-cert", ws.certs.CertFile, "-key", ws.certs.KeyFile,
		"-policies", policies, "-cache", ws.cache, "-policy-workers", strconv.Itoa(ws.policyWorkers)}, extra...)
	return startProcess(ws.certs.CAPEM, addr, "/readyz", self, args...)
}

func (ws workspace) startOPA(bin string) (*process, error) {
	addr, err := freeAddr()
	if err != nil {
		return nil, err
	}
	return startProcess(ws.certs.CAPEM, addr, "/health", bin, "run", "--server", "--addr", addr,
		"--tls-cert-file", ws.certs.CertFile, "--tls-private-key-file", ws.certs.KeyFile,
		"--log-level", "error", filepath.Join(ws.dir, "disallow-latest.rego"))
}

func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}

// loadAverage is the machine's one-minute load average now.
func loadAverage() string {
	load, _ := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(load)); len(f) > 0 {
		return f[0]
	}
	return "?"
}

func machine() string {
	host, _ := os.Hostname()
	load, _ := os.ReadFile("/proc/loadavg")
	return fmt.Sprintf("Machine: %s, %d CPUs, load average at start %s (the machine is shared; figures move with it).",
		host, numCPU(), strings.Join(strings.Fields(string(load))[:3], " "))
}
