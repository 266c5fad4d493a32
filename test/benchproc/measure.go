package benchproc

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
)

// Metrics is the child's /metrics text; empty when it does not answer.
func (p *Process) Metrics() string {
	resp, err := http.Get("http://" + p.MetricsAddr + "/metrics")
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	return string(raw)
}

// Sum is the sum of the child's samples of a metric family.
func (p *Process) Sum(family string) float64 { return Sum(p.Metrics(), family) }

// Writes is the child's client-go requests that are not reads (rest_client_requests_total
// without method="GET").
func (p *Process) Writes() float64 {
	sum := 0.0
	for _, line := range strings.Split(p.Metrics(), "\n") {
		if strings.HasPrefix(line, "rest_client_requests_total{") && !strings.Contains(line, `method="GET"`) {
			sum += value(line)
		}
	}
	return sum
}

// Sum adds every sample of family in a Prometheus text exposition.
func Sum(text, family string) float64 {
	sum := 0.0
	for _, line := range strings.Split(text, "\n") {
		rest, ok := strings.CutPrefix(line, family)
		if ok && rest != "" && (rest[0] == '{' || rest[0] == ' ') {
			sum += value(line)
		}
	}
	return sum
}

// Lines are the samples of text whose line starts with one of prefixes, for a benchmark's log.
func Lines(text string, prefixes ...string) []string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		for _, p := range prefixes {
			if strings.HasPrefix(line, p) {
				out = append(out, line)
				break
			}
		}
	}
	return out
}

func value(line string) float64 {
	fields := strings.Fields(line)
	v, _ := strconv.ParseFloat(fields[len(fields)-1], 64)
	return v
}

// PeakRSS is the high-water mark of the child's resident set (VmHWM), in bytes.
func (p *Process) PeakRSS() float64 { return p.status("VmHWM") }

// RSS is the child's resident set now (VmRSS), in bytes.
func (p *Process) RSS() float64 { return p.status("VmRSS") }

func (p *Process) status(field string) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.Pid()))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return kb * 1024
		}
	}
	return 0
}

// CPUSeconds is the user and system CPU time the child has used.
func (p *Process) CPUSeconds() float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.Pid()))
	if err != nil {
		return 0
	}
	// The fields after the command, which may hold spaces, start after its last ')'.
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}
