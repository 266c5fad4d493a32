package fleet_test

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"regent.dev/regent/fleet"
)

// BenchmarkFleetStart_HubAnd3 measures what a newcomer waits for in the quickstart: the time until
// a hub and three managed clusters answer with CRDs installed and clusters registered, and the
// memory the fleet's processes hold once up.
//
//	go test ./fleet -run '^$' -bench FleetStart -benchtime 3x
func BenchmarkFleetStart_HubAnd3(b *testing.B) { benchmarkFleetStart(b, false) }

// BenchmarkFleetStart_HubAnd3_OCMAgents is the same with OCM's own hub controllers and agents:
// the clusters join through OCM's registration (bootstrap token, CSR, acceptance) and each runs
// a registration and a work agent.
func BenchmarkFleetStart_HubAnd3_OCMAgents(b *testing.B) { benchmarkFleetStart(b, true) }

func benchmarkFleetStart(b *testing.B, ocmAgents bool) {
	specs := []fleet.ClusterSpec{{Name: "cluster1"}, {Name: "cluster2"}, {Name: "cluster3"}}
	var rss float64
	for b.Loop() {
		f, err := fleet.Start(context.Background(), fleet.Options{Managed: specs, OCMAgents: ocmAgents})
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		time.Sleep(5 * time.Second) // let the apiservers settle before reading their memory
		rss = 0
		for _, pid := range f.PIDs() {
			rss += float64(rssKiB(pid)) / 1024
		}
		b.ReportMetric(rss, "MiB-RSS-sum")
		if err := f.Stop(); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

func rssKiB(pid int) int {
	file, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0
	}
	defer file.Close()
	s := bufio.NewScanner(file)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) >= 2 && fields[0] == "VmRSS:" {
			n, _ := strconv.Atoi(fields[1])
			return n
		}
	}
	return 0
}
