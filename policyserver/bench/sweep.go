package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"regent.dev/regent/loadgen"
)

// sweepOptions configure the open-loop sweep: the rates, what each point runs, and the latency
// bound the knee is judged by.
type sweepOptions struct {
	rates            []float64
	warmup, duration time.Duration
	// bounds are the p99 bounds knees are given for, ascending; a point that misses the loosest
	// counts as failing.
	bounds []time.Duration
	// stopAfter is how many failing points in a row retire a server from the higher rates.
	stopAfter int
}

// parseRates reads "from:to:step" (500:3000:250) or a comma-separated list of rates.
func parseRates(s string) ([]float64, error) {
	if parts := strings.Split(s, ":"); len(parts) == 3 {
		var v [3]float64
		for i, p := range parts {
			f, err := strconv.ParseFloat(p, 64)
			if err != nil || f <= 0 {
				return nil, fmt.Errorf("rates %q: %q is not a positive number", s, p)
			}
			v[i] = f
		}
		var rates []float64
		for r := v[0]; r <= v[1]+1e-9; r += v[2] {
			rates = append(rates, r)
		}
		return rates, nil
	}
	var rates []float64
	for _, p := range strings.Split(s, ",") {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f <= 0 {
			return nil, fmt.Errorf("rates %q: %q is not a positive number", s, p)
		}
		rates = append(rates, f)
	}
	return rates, nil
}

// sweepTarget is one server and policy the sweep drives.
type sweepTarget struct {
	name   string
	target loadgen.Target
	points []loadgen.OpenResult
	// failing counts the failing points in a row; retired servers are not driven any higher.
	failing int
	retired bool
}

// sweepTable drives Regent's Rego path, two native waPC policies on Regent (the same Go guest's
// check decoded with encoding/json and with fastjson, as Kubewarden's Go SDK policies read their
// input without reflection) and, when opaBin is set,
// OPA's own server on the same Rego, at each rate in turn in one run, and prints every point and
// each server's knee.
func (ws workspace) sweepTable(opaBin string, o sweepOptions) error {
	regent, err := ws.startRegent(ws.policyYAML("wapc", "wapc-fastjson", "opa"))
	if err != nil {
		return err
	}
	defer regent.stop()
	review, opaInput := podBodies()
	targets := []*sweepTarget{
		{name: "Regent, Rego → wasm", target: loadgen.Target{URL: "https://" + regent.addr + "/validate/opa", Body: review, Check: checkAllowed}},
		{name: "Regent, waPC (Go guest, encoding/json)", target: loadgen.Target{URL: "https://" + regent.addr + "/validate/wapc", Body: review, Check: checkAllowed}},
		{name: "Regent, waPC (Go guest, fastjson)", target: loadgen.Target{URL: "https://" + regent.addr + "/validate/wapc-fastjson", Body: review, Check: checkAllowed}},
	}
	if opaBin != "" {
		opa, err := ws.startOPA(opaBin)
		if err != nil {
			return err
		}
		defer opa.stop()
		targets = append(targets, &sweepTarget{name: "OPA `opa run --server`, same Rego",
			target: loadgen.Target{URL: "https://" + opa.addr + "/v1/data/policy/main", Body: opaInput, Check: checkOPAAllowed}})
	}

	fmt.Printf("## Open loop: fixed rates over HTTPS (one shared keep-alive pool per point, as kube-apiserver's webhook client; %s measured after %s warm-up; latency from each request's due time)\n\n", o.duration, o.warmup)
	loosest := o.bounds[len(o.bounds)-1]
	fmt.Printf("A point passes when every request due was answered correctly and p99 ≤ the bound; a server failing %d points in a row with the loosest bound (%s) is not driven higher.\n\n", o.stopAfter, loosest)
	fmt.Println("| req/s | server | p50 | p90 | p99 | max | correct | 429 | wrong | failed | not sent | generator lag p99 | load |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
	ctx := context.Background()
	var firstErrors []string
	for i, rate := range o.rates {
		// Each rate rotates the order, so the machine's drift (it is shared) falls on every server.
		for j := range targets {
			t := targets[(i+j)%len(targets)]
			if t.retired {
				continue
			}
			client := loadgen.NewClient(ws.certs.CAPEM, 0)
			r := loadgen.OpenLoop{Rate: rate, Warmup: o.warmup, Duration: o.duration}.Run(ctx, loadgen.HTTPSender(client, t.target))
			client.CloseIdleConnections()
			t.points = append(t.points, r)
			fmt.Printf("| %.0f | %s | %s | %s | %s | %s | %d / %d | %d | %d | %d | %d | %s | %s |\n", rate, t.name,
				us(r.P50), us(r.P90), us(r.P99), us(r.Max), r.Correct, r.Scheduled, r.Rejected, r.Wrong, r.Failed, r.Overflow,
				us(r.SendLagP99), loadAverage())
			if len(r.Errors) > 0 {
				firstErrors = append(firstErrors, fmt.Sprintf("%.0f req/s, %s: %.200s", rate, t.name, strings.TrimSpace(r.Errors[0])))
			}
			if r.AllCorrect() && r.P99 <= loosest {
				t.failing = 0
			} else if t.failing++; t.failing >= o.stopAfter {
				t.retired = true
			}
			// Let the server finish what it queued before the next point.
			time.Sleep(time.Second)
		}
	}
	fmt.Println()
	if len(firstErrors) > 0 {
		fmt.Println("First error of each point that had one:")
		fmt.Println()
		for _, e := range firstErrors {
			fmt.Println("-", e)
		}
		fmt.Println()
	}
	fmt.Println("Knee: the highest rate up to which every point passed (every answer correct, p99 ≤ the bound):")
	fmt.Println()
	fmt.Print("| server |")
	for _, b := range o.bounds {
		fmt.Printf(" p99 ≤ %s |", b)
	}
	fmt.Println()
	fmt.Println("|---|" + strings.Repeat("---|", len(o.bounds)))
	for _, t := range targets {
		fmt.Printf("| %s |", t.name)
		for _, b := range o.bounds {
			fmt.Printf(" %.0f |", loadgen.Knee(t.points, b))
		}
		fmt.Println()
	}
	if opaBin != "" {
		// OPA's server is the last target; every Regent target is compared with it.
		opa := targets[len(targets)-1]
		for _, t := range targets[:len(targets)-1] {
			fmt.Printf("| ratio %s / OPA |", t.name)
			for _, b := range o.bounds {
				if k := loadgen.Knee(opa.points, b); k > 0 {
					fmt.Printf(" %.2f× |", loadgen.Knee(t.points, b)/k)
				} else {
					fmt.Print(" — |")
				}
			}
			fmt.Println()
		}
	}
	fmt.Println()
	return nil
}

// profilePoint drives one of Regent's policies at one rate while its server records a CPU
// profile, and gives the server's CPU per request over the whole run.
func (ws workspace) profilePoint(prof profile, warmup time.Duration) error {
	if prof.policy != "opa" && prof.policy != "wapc-fastjson" {
		return fmt.Errorf("-profile-policy %q: opa or wapc-fastjson", prof.policy)
	}
	regent, err := ws.startRegent(ws.policyYAML(prof.policy), "-cpuprofile", prof.path)
	if err != nil {
		return err
	}
	review, _ := json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": podRequest()})
	client := loadgen.NewClient(ws.certs.CAPEM, 0)
	before, err := cpuTime(regent.pid)
	if err != nil {
		return err
	}
	r := loadgen.OpenLoop{Rate: prof.rate, Warmup: warmup, Duration: prof.duration}.Run(context.Background(),
		loadgen.HTTPSender(client, loadgen.Target{URL: "https://" + regent.addr + "/validate/" + prof.policy, Body: review, Check: checkAllowed}))
	after, err := cpuTime(regent.pid)
	if err != nil {
		return err
	}
	client.CloseIdleConnections()
	if err := regent.stop(); err != nil {
		return err
	}
	// Every request of the run, warm-up included, as the profile covers it.
	sent := int(prof.rate * (warmup + prof.duration).Seconds())
	fmt.Printf("CPU profile of Regent's %s policy at %.0f req/s (whole run, warm-up included) in %s: p50 %s, p99 %s, %d / %d correct, %d turned away; server CPU %.2f s, ~%s per request.\n\n",
		prof.policy, prof.rate, prof.path, us(r.P50), us(r.P99), r.Correct, r.Scheduled, r.Rejected, (after - before).Seconds(), usf((after-before)/time.Duration(max(sent, 1))))
	return nil
}

// podBodies are the bodies every table sends for one pod CREATE: the AdmissionReview Regent
// answers and the input document OPA's server takes.
func podBodies() (review, opaInput []byte) {
	req := podRequest()
	review, _ = json.Marshal(map[string]any{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req})
	opaInput, _ = json.Marshal(map[string]any{"input": map[string]any{"request": req}})
	return review, opaInput
}
