package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"regent.dev/regent/loadgen"
	"regent.dev/regent/policyserver/engine"
	"regent.dev/regent/policyserver/internal/guests"
)

func numCPU() int { return runtime.NumCPU() }

// compileTable measures, per module, compiling with an empty compilation cache and again from
// the cache a previous engine filled (what a restarted replica pays).
func (ws workspace) compileTable() error {
	ctx := context.Background()
	fmt.Println("## Compile: cold vs compilation-cache hit")
	fmt.Println()
	fmt.Println("| module | size | Rego → wasm (OPA compiler) | wazero compile, cold | from cache |")
	fmt.Println("|---|---|---|---|---|")
	type mod struct {
		name  string
		wasm  []byte
		regoT time.Duration
	}
	var mods []mod
	for _, g := range []string{"wapc-labels", "wasi-privileged"} {
		b, err := guests.Build(g)
		if err != nil {
			return err
		}
		mods = append(mods, mod{name: g + " (Go wasip1)", wasm: b})
	}
	src, err := os.ReadFile(filepath.Join(ws.dir, "disallow-latest.rego"))
	if err != nil {
		return err
	}
	t0 := time.Now()
	rego, err := engine.CompileRego(ctx, map[string]string{"p.rego": string(src)}, "policy/main", false)
	if err != nil {
		return err
	}
	mods = append(mods, mod{name: "disallow-latest.rego", wasm: rego, regoT: time.Since(t0)})
	tmpl, err := os.ReadFile(filepath.Join(ws.dir, "allowedrepos.yaml"))
	if err != nil {
		return err
	}
	ct, err := engine.ParseConstraintTemplate(tmpl)
	if err != nil {
		return err
	}
	t0 = time.Now()
	gk, err := engine.CompileRego(ctx, ct.Files, ct.Entrypoint, true)
	if err != nil {
		return err
	}
	mods = append(mods, mod{name: "allowed-repos template", wasm: gk, regoT: time.Since(t0)})

	for _, m := range mods {
		cache, err := os.MkdirTemp(ws.dir, "compile-")
		if err != nil {
			return err
		}
		measure := func() (time.Duration, error) {
			e, err := engine.New(ctx, engine.Options{CacheDir: cache})
			if err != nil {
				return 0, err
			}
			defer e.Close(ctx)
			return e.Precompile(ctx, m.wasm)
		}
		cold, err := measure()
		if err != nil {
			return err
		}
		hit, err := measure()
		if err != nil {
			return err
		}
		regoT := "—"
		if m.regoT > 0 {
			regoT = ms(m.regoT)
		}
		fmt.Printf("| %s | %.1f MiB | %s | %s | %s |\n", m.name, float64(len(m.wasm))/(1<<20), regoT, ms(cold), ms(hit))
	}
	fmt.Println()
	return nil
}

// rssTable measures a server's resident memory with no policy, then with each runtime's policy
// loaded alone (compiled code, one warm instance), after a moment to settle.
func (ws workspace) rssTable() error {
	// Fill the compilation cache first so the servers measured load, not compile.
	if p, err := ws.startRegent(ws.policyYAML("wapc", "wasi", "opa", "gatekeeper")); err != nil {
		return err
	} else if err := p.stop(); err != nil {
		return err
	}
	measure := func(names ...string) (int64, error) {
		p, err := ws.startRegent(ws.policyYAML(names...))
		if err != nil {
			return 0, err
		}
		defer p.stop()
		time.Sleep(time.Second)
		return rssBytes(p.pid)
	}
	base, err := measure()
	if err != nil {
		return err
	}
	fmt.Println("## Resident memory per loaded policy")
	fmt.Println()
	fmt.Printf("Policy server with no policy: %.1f MiB RSS.\n\n", mib(base))
	fmt.Println("| runtime | RSS with the policy loaded | added by the policy |")
	fmt.Println("|---|---|---|")
	for _, r := range runtimes {
		rss, err := measure(r.policy)
		if err != nil {
			return err
		}
		fmt.Printf("| %s | %.1f MiB | %.1f MiB |\n", r.name, mib(rss), mib(rss-base))
	}
	fmt.Println()
	return nil
}

func (ws workspace) loadTable(opaBin string, concurrencies []int, warmup, duration time.Duration) error {
	regent, err := ws.startRegent(ws.policyYAML("wapc", "wasi", "opa", "gatekeeper"))
	if err != nil {
		return err
	}
	defer regent.stop()
	var opa *process
	if opaBin != "" {
		if opa, err = ws.startOPA(opaBin); err != nil {
			return err
		}
		defer opa.stop()
	}
	req := podRequest()
	review, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
	opaInput, _ := json.Marshal(map[string]any{"input": map[string]any{"request": req}})

	fmt.Printf("## /validate over HTTPS (HTTP/1.1 keep-alive, one connection per concurrent client; %s measured after %s warmup)\n\n", duration, warmup)
	fmt.Println("| server | runtime | concurrency | req/s | p50 | p99 | errors |")
	fmt.Println("|---|---|---|---|---|---|---|")
	ratio := map[int]float64{}
	for _, c := range concurrencies {
		run := func(name, runtime, url string, body []byte, check func([]byte) error) (loadgen.Result, error) {
			res, err := loadgen.Run(loadgen.Target{URL: url, Body: body, Check: check}, ws.certs.CAPEM, c, warmup, duration)
			if err != nil && res.Requests == 0 {
				return res, fmt.Errorf("%s %s: %w", name, runtime, err)
			}
			row(name, runtime, c, res)
			return res, nil
		}
		regentRego := func() (loadgen.Result, error) {
			return run("Regent policy server", "OPA (Rego → wasm)", "https://"+regent.addr+"/validate/opa", review, checkAllowed)
		}
		opaServer := func() (loadgen.Result, error) {
			return run("OPA v1.22.2 `opa run --server`", "Rego (topdown), data API", "https://"+opa.addr+"/v1/data/policy/main", opaInput, checkOPAAllowed)
		}
		// The comparison runs in A-B-B-A order so that drift in the machine's load (it is shared)
		// falls on both sides alike.
		if opa != nil {
			var rates [4]float64
			for i, f := range []func() (loadgen.Result, error){opaServer, regentRego, regentRego, opaServer} {
				res, err := f()
				if err != nil {
					return err
				}
				rates[i] = res.Rate()
			}
			ratio[c] = (rates[1] + rates[2]) / (rates[0] + rates[3])
		}
		for _, r := range runtimes {
			if r.policy == "opa" && opa != nil {
				continue
			}
			if _, err := run("Regent policy server", r.name, "https://"+regent.addr+"/validate/"+r.policy, review, checkAllowed); err != nil {
				return err
			}
		}
	}
	fmt.Println()
	if opa != nil {
		fmt.Println("Ratio of Regent's Rego-in-wasm path to OPA's native server (same Rego, same pod, same transport; req/s summed over the A-B-B-A runs):")
		fmt.Println()
		for _, c := range concurrencies {
			fmt.Printf("- concurrency %d: %.2f×\n", c, ratio[c])
		}
		fmt.Println()
	}
	return nil
}

func row(server, runtime string, c int, r loadgen.Result) {
	fmt.Printf("| %s | %s | %d | %.0f | %s | %s | %d |\n", server, runtime, c, r.Rate(), us(r.P50), us(r.P99), r.Errors)
}

func checkAllowed(b []byte) error {
	var review struct {
		Response struct {
			Allowed bool `json:"allowed"`
			Status  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"status"`
		} `json:"response"`
	}
	if err := json.Unmarshal(b, &review); err != nil {
		return fmt.Errorf("not an AdmissionReview: %s", b)
	}
	if !review.Response.Allowed {
		// The message first: it says why (a timeout, a policy error), and the sweep shows only
		// the first 200 characters of an error.
		if st := review.Response.Status; st != nil {
			return fmt.Errorf("not allowed (%d): %s", st.Code, st.Message)
		}
		return fmt.Errorf("not allowed: %s", b)
	}
	return nil
}

func checkOPAAllowed(b []byte) error {
	var out struct {
		Result struct {
			Response struct {
				Allowed bool `json:"allowed"`
			} `json:"response"`
		} `json:"result"`
	}
	if err := json.Unmarshal(b, &out); err != nil || !out.Result.Response.Allowed {
		return fmt.Errorf("not allowed: %s", b)
	}
	return nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.0f ms", float64(d)/float64(time.Millisecond)) }

func us(d time.Duration) string {
	if d < 10*time.Millisecond {
		return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond))
	}
	return ms(d)
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
