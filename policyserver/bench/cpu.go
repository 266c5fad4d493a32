package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"regent.dev/regent/loadgen"
)

// userHZ is the unit of the CPU times in /proc/<pid>/stat: USER_HZ, 100 on every Linux
// architecture Go runs on (the kernel's own tick rate does not change it).
const userHZ = 100

// cpuTime is a process's user + system CPU time so far, all its threads, from /proc.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) from a /proc/<pid>/stat line. The
// command name (field 2) is in parentheses and may hold spaces, so fields count from its end.
func parseStatCPU(stat string) (time.Duration, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("stat %q: no command name", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): utime is f[11], stime f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("stat %q: too few fields", stat)
	}
	var ticks int64
	for _, s := range f[11:13] {
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("stat %q: %w", stat, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// selfCPU is this process's (the generator's) user + system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuOptions configure the CPU-per-request runs: each target at each rate, rounds times.
type cpuOptions struct {
	rates            []float64
	rounds           int
	warmup, duration time.Duration
}

// cpuTarget is one server and policy whose CPU per request is measured.
type cpuTarget struct {
	name   string
	proc   *process
	target loadgen.Target
	// perRequest holds each round's server CPU per answered request, per rate.
	perRequest map[float64][]time.Duration
}

// cpuTable drives Regent's Rego path, the waPC fastjson guest and OPA's server at fixed rates
// well below their knees and divides each server's CPU time over the measured window by the
// requests it answered. Unlike a knee, this moves little with the machine's load: a busier
// machine delays the server's work but does not add to it (caches and frequency aside), so
// the ratio of two servers measured side by side is the figure to compare.
func (ws workspace) cpuTable(opaBin string, o cpuOptions) error {
	regent, err := ws.startRegent(ws.policyYAML("wapc-fastjson", "opa"))
	if err != nil {
		return err
	}
	defer regent.stop()
	review, opaInput := podBodies()
	targets := []*cpuTarget{
		{name: "Regent, Rego → wasm", proc: regent, target: loadgen.Target{URL: "https://" + regent.addr + "/validate/opa", Body: review, Check: checkAllowed}},
		{name: "Regent, waPC (Go guest, fastjson)", proc: regent, target: loadgen.Target{URL: "https://" + regent.addr + "/validate/wapc-fastjson", Body: review, Check: checkAllowed}},
	}
	if opaBin != "" {
		opa, err := ws.startOPA(opaBin)
		if err != nil {
			return err
		}
		defer opa.stop()
		targets = append(targets, &cpuTarget{name: "OPA `opa run --server`, same Rego", proc: opa,
			target: loadgen.Target{URL: "https://" + opa.addr + "/v1/data/policy/main", Body: opaInput, Check: checkOPAAllowed}})
	}
	for _, t := range targets {
		t.perRequest = map[float64][]time.Duration{}
	}

	fmt.Printf("## CPU per request: each server's user + system CPU over the measured window ÷ the requests it answered (open loop at a fixed rate, %s measured after a %s warm-up run, %d rounds, order rotated each round)\n\n", o.duration, o.warmup, o.rounds)
	fmt.Println("| req/s | round | server | server CPU per request | server CPU (cores) | generator CPU per request | p50 | p99 | correct | 429 | load |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|---|")
	ctx := context.Background()
	n := 0
	for _, rate := range o.rates {
		for round := 1; round <= o.rounds; round++ {
			for j := range targets {
				t := targets[(n+j)%len(targets)]
				client := loadgen.NewClient(ws.certs.CAPEM, 0)
				send := loadgen.HTTPSender(client, t.target)
				// The warm-up is a run of its own, waited out, so no request of it is in flight
				// when the server's CPU is read.
				loadgen.OpenLoop{Rate: rate, Duration: o.warmup}.Run(ctx, send)
				before, err := cpuTime(t.proc.pid)
				if err != nil {
					return err
				}
				gen := selfCPU()
				r := loadgen.OpenLoop{Rate: rate, Duration: o.duration}.Run(ctx, send)
				after, err := cpuTime(t.proc.pid)
				if err != nil {
					return err
				}
				gen = selfCPU() - gen
				client.CloseIdleConnections()
				answered := r.Correct + r.Rejected + r.Wrong
				if answered == 0 {
					return fmt.Errorf("%s at %.0f req/s: no request answered (%v)", t.name, rate, r.Errors)
				}
				per := (after - before) / time.Duration(answered)
				t.perRequest[rate] = append(t.perRequest[rate], per)
				fmt.Printf("| %.0f | %d | %s | %s | %.2f | %s | %s | %s | %d / %d | %d | %s |\n", rate, round, t.name,
					usf(per), (after-before).Seconds()/o.duration.Seconds(), usf(gen/time.Duration(max(answered, 1))),
					us(r.P50), us(r.P99), r.Correct, r.Scheduled, r.Rejected, loadAverage())
				time.Sleep(time.Second)
			}
			n++
		}
	}
	fmt.Println()
	fmt.Println("Median over the rounds, and the ratio to OPA's server measured in the same run (below 1: Regent spends less CPU per request):")
	fmt.Println()
	fmt.Println("| req/s | server | CPU per request (median) | ratio to OPA |")
	fmt.Println("|---|---|---|---|")
	for _, rate := range o.rates {
		var opa time.Duration
		if opaBin != "" {
			opa = median(targets[len(targets)-1].perRequest[rate])
		}
		for _, t := range targets {
			m := median(t.perRequest[rate])
			ratio := "—"
			if opa > 0 {
				ratio = fmt.Sprintf("%.2f", float64(m)/float64(opa))
			}
			fmt.Printf("| %.0f | %s | %s | %s |\n", rate, t.name, usf(m), ratio)
		}
	}
	fmt.Println()
	return nil
}

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// usf is a duration in microseconds with one decimal: CPU per request is tens to hundreds.
func usf(d time.Duration) string {
	return fmt.Sprintf("%.1f µs", float64(d)/float64(time.Microsecond))
}
